// Sparse CSV parsing: the header is matched against the options once into a
// plan per column, with each column's keys (field state, bucket keys)
// computed up front; rows then only scan, hash values and add entries.
// Quantile buckets need the file's values first, so such a file is scanned
// twice (the first pass parses only those columns).
#include "data/sparse_csv_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/csv_scanner.h"
#include "data/feature_hash.h"
#include "data/file_reader.h"
#include "data/reader_internal.h"

namespace downpour::data {
namespace {

using internal::CsvScanner;
using internal::ErrorAt;
using internal::NumberKind;
using internal::Quote;

// What to do with one column of the file.
struct ColumnPlan {
  enum Action { kLabel, kIgnore, kCategorical, kText, kValue, kBucketize };
  Action action = kIgnore;
  std::string name;            // the header's
  int option = -1;             // index into options.columns, -1 for the label
  uint16_t field = 0;          // its entries' field (see the header)
  bool quantiles = false;      // kBucketize from quantile_buckets
  uint64_t field_key = 0;      // kValue: FieldKey(name)
  std::vector<double> bounds;  // kBucketize
  std::vector<uint64_t> buckets;  // kBucketize: FeatureKey(name, "b<i>")
};

// The options' own errors (at line 1, column 1).
absl::Status CheckOptions(const std::string& name,
                          const SparseCsvOptions& options) {
  if (!options.csv.header) {
    return ErrorAt(name, 1, 1,
                   "the sparse CSV reader needs a header (columns are named "
                   "by it); set data.header: true and add a header line");
  }
  const int64_t fields =
      std::count_if(options.columns.begin(), options.columns.end(),
                    [](const SparseColumn& c) {
                      return c.kind != SparseColumnKind::kIgnore;
                    });
  if (fields > kMaxSparseCsvFields) {
    return ErrorAt(name, 1, 1,
                   absl::StrCat(fields,
                                " columns are categorical, text or numeric; "
                                "at most ",
                                kMaxSparseCsvFields,
                                " can be (each is a field, numbered in 16 "
                                "bits); ignore some columns"));
  }
  for (const SparseColumn& c : options.columns) {
    const std::string column = absl::StrCat("column ", Quote(c.name));
    const bool numeric = c.kind == SparseColumnKind::kNumeric;
    if (!numeric && (!c.boundaries.empty() || c.quantile_buckets != 0)) {
      return ErrorAt(name, 1, 1,
                     absl::StrCat(column, " is ", SparseColumnKindName(c.kind),
                                  ": boundaries and quantile_buckets apply to "
                                  "numeric columns only; drop them or make "
                                  "the column numeric"));
    }
    if (!c.boundaries.empty() && c.quantile_buckets != 0) {
      return ErrorAt(name, 1, 1,
                     absl::StrCat(column,
                                  " has both boundaries and quantile_buckets; "
                                  "give one of them"));
    }
    if (c.quantile_buckets == 1 || c.quantile_buckets < 0) {
      return ErrorAt(
          name, 1, 1,
          absl::StrCat(column, ": quantile_buckets ", c.quantile_buckets,
                       " must be at least 2 (or 0: not bucketized "
                       "by quantiles)"));
    }
    for (size_t i = 0; i < c.boundaries.size(); ++i) {
      if (!std::isfinite(c.boundaries[i]) ||
          (i > 0 && !(c.boundaries[i] > c.boundaries[i - 1]))) {
        return ErrorAt(name, 1, 1,
                       absl::StrCat(column,
                                    ": boundaries must be finite and strictly "
                                    "ascending; boundary ",
                                    i, " is ", c.boundaries[i]));
      }
    }
  }
  return absl::OkStatus();
}

// Bucket keys "b0".."b<bounds.size()>" of a column.
std::vector<uint64_t> BucketKeys(const std::string& name, size_t bounds) {
  std::vector<uint64_t> keys;
  for (size_t i = 0; i <= bounds; ++i) {
    keys.push_back(FeatureKey(name, absl::StrCat("b", i)));
  }
  return keys;
}

// Sets plan->action (and its keys) from the column's kind.
void SetAction(const SparseColumn& column, ColumnPlan* plan) {
  switch (column.kind) {
    case SparseColumnKind::kCategorical:
      plan->action = ColumnPlan::kCategorical;
      return;
    case SparseColumnKind::kText:
      plan->action = ColumnPlan::kText;
      return;
    case SparseColumnKind::kIgnore:
      plan->action = ColumnPlan::kIgnore;
      return;
    case SparseColumnKind::kNumeric:
      if (column.boundaries.empty() && column.quantile_buckets == 0) {
        plan->action = ColumnPlan::kValue;
        plan->field_key = FieldKey(plan->name);
        return;
      }
      plan->action = ColumnPlan::kBucketize;
      plan->quantiles = column.quantile_buckets != 0;
      plan->bounds = column.boundaries;
      plan->buckets = BucketKeys(plan->name, plan->bounds.size());
      return;
  }
}

// Quantile boundaries of `values` (sorted in place) for `buckets` buckets.
std::vector<double> QuantileBounds(std::vector<float>* values, int buckets) {
  std::sort(values->begin(), values->end());
  const size_t n = values->size();
  std::vector<double> bounds;
  for (int j = 1; j < buckets; ++j) {
    const double b = (*values)[static_cast<size_t>(j) * n / buckets];
    if (bounds.empty() || b > bounds.back()) bounds.push_back(b);
  }
  return bounds;
}

// One file's parse. Not thread-safe; used once.
class SparseCsvParser {
 public:
  SparseCsvParser(absl::string_view text, const std::string& name,
                  const SparseCsvOptions& options)
      : text_(text), name_(name), options_(options) {}

  absl::StatusOr<SparseDataset> Parse(std::vector<SparseColumn>* applied);

 private:
  // Maps each header name to its column: an error for a repeated name or one
  // holding kFieldSeparator.
  absl::Status IndexHeader(
      const CsvScanner& scanner,
      absl::flat_hash_map<absl::string_view, int>* by_name) const;
  // plan_ from the header and options_.columns.
  absl::Status Plan(const CsvScanner& scanner);
  // The header column of options_ column `column`: an error when the header
  // lacks it, it is the label column, or `listed` has it already.
  absl::StatusOr<int> ListedColumn(
      const CsvScanner& scanner,
      const absl::flat_hash_map<absl::string_view, int>& by_name,
      const SparseColumn& column, const std::vector<bool>& listed) const;
  // An error naming the columns, the label's aside, that `listed` lacks.
  absl::Status CheckAllListed(const CsvScanner& scanner,
                              const std::vector<bool>& listed) const;
  absl::Status PlanError(const CsvScanner& scanner,
                         absl::string_view message) const {
    return ErrorAt(name_, scanner.width_line(), 1, message);
  }
  absl::Status ComputeQuantiles();
  // The number in `token` (at `start`) of numeric column `column`: *present
  // is false for a missing value.
  absl::Status ParseNumber(const CsvScanner& scanner, const char* start,
                           absl::string_view token, int column, float* value,
                           bool* present) const;
  absl::Status ParseRow(CsvScanner* scanner, SparseRowWriter* writer);
  absl::Status AddField(CsvScanner* scanner, const ColumnPlan& plan, int column,
                        const char* start, absl::string_view token,
                        SparseRowWriter* writer, float* y);

  // Constant after construction.
  const absl::string_view text_;
  const std::string& name_;
  const SparseCsvOptions& options_;

  std::vector<ColumnPlan> plan_;  // one per column of the file
  std::vector<uint64_t> token_keys_;
};

absl::Status SparseCsvParser::IndexHeader(
    const CsvScanner& scanner,
    absl::flat_hash_map<absl::string_view, int>* by_name) const {
  const std::vector<std::string>& names = scanner.names();
  for (int c = 0; c < static_cast<int>(names.size()); ++c) {
    const auto [it, fresh] = by_name->emplace(names[c], c);
    if (!fresh) {
      return PlanError(scanner,
                       absl::StrCat("the header names column ", Quote(names[c]),
                                    " twice (columns ", it->second, " and ", c,
                                    ", 0-based); rename one so each column can "
                                    "be given a kind"));
    }
    if (names[c].find(kFieldSeparator) != std::string::npos) {
      return PlanError(scanner,
                       absl::StrCat("column name ", Quote(names[c]),
                                    " holds the byte 0x1f, which separates a "
                                    "field from its value in feature keys; "
                                    "rename the column"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SparseCsvParser::ListedColumn(
    const CsvScanner& scanner,
    const absl::flat_hash_map<absl::string_view, int>& by_name,
    const SparseColumn& column, const std::vector<bool>& listed) const {
  const auto it = by_name.find(column.name);
  if (it == by_name.end()) {
    std::vector<std::string> quoted;
    for (const std::string& n : scanner.names()) quoted.push_back(Quote(n));
    return PlanError(scanner,
                     absl::StrCat("column ", Quote(column.name),
                                  " of the options is not in the header; the "
                                  "columns are ",
                                  absl::StrJoin(quoted, ", "),
                                  " (names are case-sensitive)"));
  }
  const int c = it->second;
  if (c == scanner.label_column()) {
    return PlanError(scanner,
                     absl::StrCat("column ", Quote(column.name),
                                  " is the label column; leave it out of "
                                  "the feature columns"));
  }
  if (listed[c]) {
    return PlanError(scanner,
                     absl::StrCat("column ", Quote(column.name),
                                  " is given a kind twice; list each column "
                                  "once"));
  }
  return c;
}

absl::Status SparseCsvParser::CheckAllListed(
    const CsvScanner& scanner, const std::vector<bool>& listed) const {
  const std::vector<std::string>& names = scanner.names();
  std::vector<std::string> unlisted;
  for (int c = 0; c < static_cast<int>(names.size()); ++c) {
    if (!listed[c] && c != scanner.label_column()) {
      unlisted.push_back(Quote(names[c]));
    }
  }
  if (!unlisted.empty()) {
    return PlanError(
        scanner,
        absl::StrCat("column", unlisted.size() > 1 ? "s " : " ",
                     absl::StrJoin(unlisted, ", "),
                     unlisted.size() > 1 ? " have" : " has",
                     " no kind; list each column as categorical, text, "
                     "numeric or ignore"));
  }
  return absl::OkStatus();
}

absl::Status SparseCsvParser::Plan(const CsvScanner& scanner) {
  const std::vector<std::string>& names = scanner.names();
  absl::flat_hash_map<absl::string_view, int> by_name;  // header column
  RETURN_IF_ERROR(IndexHeader(scanner, &by_name));
  plan_.assign(names.size(), ColumnPlan());
  for (int c = 0; c < static_cast<int>(names.size()); ++c) {
    plan_[c].name = names[c];
  }
  if (scanner.label_column() >= 0) {
    plan_[scanner.label_column()].action = ColumnPlan::kLabel;
  }
  std::vector<bool> listed(names.size(), false);
  int field = 0;  // CheckOptions capped the fields at kMaxSparseCsvFields
  for (int i = 0; i < static_cast<int>(options_.columns.size()); ++i) {
    const SparseColumn& column = options_.columns[i];
    ASSIGN_OR_RETURN(const int c,
                     ListedColumn(scanner, by_name, column, listed));
    listed[c] = true;
    plan_[c].option = i;
    if (column.kind != SparseColumnKind::kIgnore) {
      plan_[c].field = static_cast<uint16_t>(field++);
    }
    SetAction(column, &plan_[c]);
  }
  return CheckAllListed(scanner, listed);
}

absl::Status SparseCsvParser::ParseNumber(const CsvScanner& scanner,
                                          const char* start,
                                          absl::string_view token, int column,
                                          float* value, bool* present) const {
  *present = !internal::IsMissingMarker(token);
  if (!*present) return absl::OkStatus();
  switch (internal::ParseFloat(token, value)) {
    case NumberKind::kOk:
      return absl::OkStatus();
    case NumberKind::kNaN:
      return scanner.Error(
          start, absl::StrCat("value ", Quote(token), " in ",
                              scanner.ColumnName(column),
                              " is NaN; write a missing value as an empty "
                              "field (it then adds no feature)"));
    case NumberKind::kInf:
      return scanner.Error(start,
                           absl::StrCat("value ", Quote(token), " in ",
                                        scanner.ColumnName(column),
                                        " is infinite or too large for a "
                                        "float; fix or drop the row"));
    case NumberKind::kNotNumber:
      break;
  }
  RETURN_IF_ERROR(scanner.CheckText(start, token));
  return scanner.Error(
      start, absl::StrCat("field ", Quote(token), " in numeric ",
                          scanner.ColumnName(column),
                          " is not a number; fix the value, or declare the "
                          "column categorical"));
}

absl::Status SparseCsvParser::ComputeQuantiles() {
  std::vector<int> columns;
  for (int c = 0; c < static_cast<int>(plan_.size()); ++c) {
    if (plan_[c].quantiles) columns.push_back(c);
  }
  if (columns.empty()) return absl::OkStatus();
  std::vector<std::vector<float>> values(plan_.size());
  CsvScanner scanner(text_, name_, options_.csv);
  bool found;
  RETURN_IF_ERROR(scanner.Start(&found));
  const int width = scanner.columns();
  while (found) {
    const absl::string_view line = scanner.line();
    const char* p = line.data();
    const char* end = p + line.size();
    for (int c = 0; c < width; ++c) {
      absl::string_view token;
      const char* start;
      RETURN_IF_ERROR(scanner.ScanField(&p, &token, &start));
      if (plan_[c].quantiles) {
        float v;
        bool present;
        RETURN_IF_ERROR(ParseNumber(scanner, start, token, c, &v, &present));
        if (present) values[c].push_back(v);
      }
      if (c + 1 < width) {
        if (p == end) return scanner.ColumnCountError();
        ++p;
      }
    }
    if (p != end) return scanner.ColumnCountError();
    RETURN_IF_ERROR(scanner.NextDataLine(&found));
  }
  for (int c : columns) {
    ColumnPlan& p = plan_[c];
    if (values[c].empty()) {
      return ErrorAt(name_, scanner.width_line(), 1,
                     absl::StrCat("numeric column ", Quote(p.name),
                                  " has no values to compute quantile "
                                  "buckets from; give boundaries, or ignore "
                                  "the column"));
    }
    p.bounds =
        QuantileBounds(&values[c], options_.columns[p.option].quantile_buckets);
    p.buckets = BucketKeys(p.name, p.bounds.size());
  }
  return absl::OkStatus();
}

absl::Status SparseCsvParser::AddField(CsvScanner* scanner,
                                       const ColumnPlan& plan, int column,
                                       const char* start,
                                       absl::string_view token,
                                       SparseRowWriter* writer, float* y) {
  switch (plan.action) {
    case ColumnPlan::kLabel:
      return scanner->ParseLabel(start, token, y);
    case ColumnPlan::kIgnore:
      return absl::OkStatus();
    case ColumnPlan::kCategorical:
    case ColumnPlan::kText:
      if (internal::IsMissingMarker(token)) return absl::OkStatus();
      RETURN_IF_ERROR(scanner->CheckText(start, token));
      if (plan.action == ColumnPlan::kCategorical) {
        writer->Add(FeatureKey(plan.name, token), 1.0f, plan.field);
        return absl::OkStatus();
      }
      token_keys_.clear();
      AppendTokenKeys(plan.name, token, &token_keys_);
      for (uint64_t key : token_keys_) writer->Add(key, 1.0f, plan.field);
      return absl::OkStatus();
    case ColumnPlan::kValue:
    case ColumnPlan::kBucketize: {
      float v;
      bool present;
      RETURN_IF_ERROR(
          ParseNumber(*scanner, start, token, column, &v, &present));
      if (!present) return absl::OkStatus();
      if (plan.action == ColumnPlan::kValue) {
        writer->Add(plan.field_key, v, plan.field);
      } else {
        const size_t bucket =
            std::upper_bound(plan.bounds.begin(), plan.bounds.end(),
                             static_cast<double>(v)) -
            plan.bounds.begin();
        writer->Add(plan.buckets[bucket], 1.0f, plan.field);
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status SparseCsvParser::ParseRow(CsvScanner* scanner,
                                       SparseRowWriter* writer) {
  const absl::string_view line = scanner->line();
  const char* p = line.data();
  const char* end = p + line.size();
  const int width = scanner->columns();
  float y = std::nanf("");
  for (int c = 0; c < width; ++c) {
    absl::string_view token;
    const char* start;
    RETURN_IF_ERROR(scanner->ScanField(&p, &token, &start));
    RETURN_IF_ERROR(AddField(scanner, plan_[c], c, start, token, writer, &y));
    if (c + 1 < width) {
      if (p == end) return scanner->ColumnCountError();
      ++p;  // the delimiter
    }
  }
  if (p != end) return scanner->ColumnCountError();
  const absl::Status status = writer->EndRow(y);
  if (!status.ok()) return scanner->Error(line.data(), status.message());
  return absl::OkStatus();
}

absl::StatusOr<SparseDataset> SparseCsvParser::Parse(
    std::vector<SparseColumn>* applied) {
  RETURN_IF_ERROR(CheckOptions(name_, options_));
  CsvScanner scanner(text_, name_, options_.csv);
  bool found;
  RETURN_IF_ERROR(scanner.Start(&found));
  RETURN_IF_ERROR(Plan(scanner));
  if (!found) {
    return ErrorAt(name_, scanner.line_number() + 1, 1,
                   "no data rows after the header; is the file complete?");
  }
  RETURN_IF_ERROR(ComputeQuantiles());
  SparseDataset data;
  SparseRowWriter writer(&data, /*with_fields=*/true);
  while (found) {
    RETURN_IF_ERROR(ParseRow(&scanner, &writer));
    RETURN_IF_ERROR(scanner.NextDataLine(&found));
  }
  if (options_.csv.has_label) {
    scanner.FinishLabels(&data.y, &data.class_names);
  }
  if (applied != nullptr) {
    *applied = options_.columns;
    for (const ColumnPlan& p : plan_) {
      if (!p.quantiles) continue;
      SparseColumn& column = (*applied)[p.option];
      column.boundaries = p.bounds;
      column.quantile_buckets = 0;
    }
  }
  return data;
}

}  // namespace

const char* SparseColumnKindName(SparseColumnKind kind) {
  switch (kind) {
    case SparseColumnKind::kCategorical:
      return "categorical";
    case SparseColumnKind::kText:
      return "text";
    case SparseColumnKind::kNumeric:
      return "numeric";
    case SparseColumnKind::kIgnore:
      return "ignore";
  }
  return "?";
}

absl::StatusOr<SparseColumnKind> ParseSparseColumnKind(absl::string_view name) {
  for (SparseColumnKind kind :
       {SparseColumnKind::kCategorical, SparseColumnKind::kText,
        SparseColumnKind::kNumeric, SparseColumnKind::kIgnore}) {
    if (name == SparseColumnKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown column kind '", name,
                   "': expected categorical, text, numeric or ignore"));
}

absl::StatusOr<SparseDataset> ParseCsvSparse(
    absl::string_view text, const std::string& name,
    const SparseCsvOptions& options, std::vector<SparseColumn>* applied) {
  return SparseCsvParser(text, name, options).Parse(applied);
}

absl::StatusOr<SparseDataset> ReadCsvSparse(
    const std::string& path, const SparseCsvOptions& options,
    std::vector<SparseColumn>* applied) {
  ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  return ParseCsvSparse(text, path, options, applied);
}

}  // namespace downpour::data
