// libFuzzer target: the CSV and LIBSVM readers (data/csv_reader.h,
// data/libsvm_reader.h), dense and sparse (data/sparse_csv_reader.h), and the
// gunzip of data/file_reader.h on arbitrary bytes.
//
// The first byte picks the options (bit 0: CSV header; bits 1-2: delimiter
// ',', '\t', ';', or ',' with label_column "0"; bit 3: real labels; bits 4-5:
// missing error/zero/mean, or explicit classes {"0", "1", "a"}; bit 6:
// skip_lines 1; bit 7: LIBSVM zero_based with dim 8); the rest is the text,
// given to ParseCsv, ParseLibsvm, ParseLibsvmSparse, ParseCsvSparse (after a
// fixed header "a,b,c,d,y" in the chosen delimiter, the columns categorical,
// text, numeric value and numeric in 3 quantile buckets), and to MaybeGunzip
// (limited to 1 MiB of output).
//
// Invariants beyond "no crash, no sanitizer report, no huge allocation":
// an accepted table has rows() > 0, dim > 0, dim * rows() floats, dim feature
// names, finite features and targets, and with kClass targets that are
// indices into class_names; an accepted sparse dataset passes
// ValidateSparseDataset, with such targets; every error is InvalidArgument and
// starts with "fuzz.<ext>:<line>:<column>: ".
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "data/csv_reader.h"
#include "data/file_reader.h"
#include "data/libsvm_reader.h"
#include "data/sparse_csv_reader.h"
#include "data/sparse_dataset.h"

namespace {

using downpour::data::LabelMode;
using downpour::data::SparseColumnKind;
using downpour::data::SparseDataset;
using downpour::data::Table;

void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "reader_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

// "name:<digits>:<digits>: " at the start of the message.
bool HasLocation(const std::string& message, const std::string& name) {
  if (!absl::StartsWith(message, name + ":")) return false;
  size_t i = name.size() + 1;
  for (int part = 0; part < 2; ++part) {
    const size_t digits = i;
    while (i < message.size() && absl::ascii_isdigit(message[i])) ++i;
    if (i == digits || i >= message.size() || message[i] != ':') return false;
    ++i;
  }
  return i < message.size() && message[i] == ' ';
}

void CheckResult(const absl::StatusOr<Table>& result, const std::string& name,
                 LabelMode labels, size_t max_classes) {
  if (!result.ok()) {
    const std::string message(result.status().message());
    if (!absl::IsInvalidArgument(result.status())) {
      Fail("an error is not InvalidArgument", result.status().ToString());
    }
    if (!HasLocation(message, name)) {
      Fail("an error does not start with file:line:column", message);
    }
    return;
  }
  const Table& t = *result;
  if (t.rows() <= 0 || t.dim <= 0) Fail("empty table accepted", name);
  if (t.x.size() != static_cast<size_t>(t.rows()) * t.dim) {
    Fail("x is not rows * dim", name);
  }
  if (t.feature_names.size() != static_cast<size_t>(t.dim)) {
    Fail("feature_names is not dim long", name);
  }
  for (float v : t.x) {
    if (!std::isfinite(v)) Fail("a feature is not finite", name);
  }
  for (float y : t.y) {
    if (!std::isfinite(y)) Fail("a target is not finite", name);
    if (labels == LabelMode::kClass &&
        (y < 0 || y != std::floor(y) || y >= t.class_names.size())) {
      Fail("a class index is outside class_names", std::to_string(y));
    }
  }
  if (labels == LabelMode::kClass &&
      (t.class_names.empty() || t.class_names.size() > max_classes)) {
    Fail("class_names is empty or too long", name);
  }
  if (labels == LabelMode::kReal && !t.class_names.empty()) {
    Fail("class_names with real labels", name);
  }
}

void CheckError(const absl::Status& status, const std::string& name) {
  if (!absl::IsInvalidArgument(status)) {
    Fail("an error is not InvalidArgument", status.ToString());
  }
  if (!HasLocation(std::string(status.message()), name)) {
    Fail("an error does not start with file:line:column",
         std::string(status.message()));
  }
}

void CheckSparse(const absl::StatusOr<SparseDataset>& result,
                 const std::string& name, LabelMode labels,
                 size_t max_classes) {
  if (!result.ok()) return CheckError(result.status(), name);
  const absl::Status valid = ValidateSparseDataset(*result);
  if (!valid.ok()) Fail("an invalid sparse dataset", valid.ToString());
  if (result->rows() <= 0) Fail("empty sparse dataset accepted", name);
  for (float y : result->y) {
    if (!std::isfinite(y)) Fail("a sparse target is not finite", name);
    if (labels == LabelMode::kClass &&
        (y < 0 || y != std::floor(y) || y >= result->class_names.size() ||
         result->class_names.size() > max_classes)) {
      Fail("a sparse class index is outside class_names", std::to_string(y));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool explicit_classes = ((flags >> 4) & 3) == 3;
  const std::vector<std::string> classes = {"0", "1", "a"};
  const size_t max_classes = explicit_classes ? classes.size() : 1000;
  const LabelMode labels = flags & 8 ? LabelMode::kReal : LabelMode::kClass;

  downpour::data::CsvOptions csv;
  csv.header = flags & 1;
  const int delimiter = (flags >> 1) & 3;
  csv.delimiter = delimiter == 1 ? '\t' : delimiter == 2 ? ';' : ',';
  if (delimiter == 3) csv.label_column = "0";
  csv.labels = labels;
  switch ((flags >> 4) & 3) {
    case 0:
      csv.missing = downpour::data::Missing::kError;
      break;
    case 1:
      csv.missing = downpour::data::Missing::kZero;
      break;
    case 2:
      csv.missing = downpour::data::Missing::kMean;
      break;
    case 3:
      csv.classes = classes;
      break;
  }
  csv.skip_lines = flags & 64 ? 1 : 0;
  csv.max_line_bytes = 4096;
  CheckResult(downpour::data::ParseCsv(text, "fuzz.csv", csv), "fuzz.csv",
              labels, max_classes);

  downpour::data::LibsvmOptions svm;
  svm.zero_based = flags & 128;
  svm.dim = flags & 128 ? 8 : 0;
  svm.labels = labels;
  if (explicit_classes) svm.classes = classes;
  svm.max_line_bytes = 4096;
  // A 15-byte line "1 9999999:1" is a 40 MB table; checking it under the
  // sanitizers takes seconds. The limit itself is tested in data/.
  svm.max_dense_bytes = 4 << 20;
  CheckResult(downpour::data::ParseLibsvm(text, "fuzz.svm", svm), "fuzz.svm",
              labels, max_classes);

  downpour::data::LibsvmSparseOptions sparse_svm;
  sparse_svm.labels = labels;
  if (explicit_classes) sparse_svm.classes = classes;
  sparse_svm.max_line_bytes = 4096;
  CheckSparse(downpour::data::ParseLibsvmSparse(text, "fuzz.svm", sparse_svm),
              "fuzz.svm", labels, max_classes);

  downpour::data::SparseCsvOptions sparse_csv;
  sparse_csv.csv = csv;
  sparse_csv.csv.header = true;
  sparse_csv.csv.skip_lines = 0;
  sparse_csv.csv.label_column = "y";
  const SparseColumnKind kinds[] = {
      SparseColumnKind::kCategorical, SparseColumnKind::kText,
      SparseColumnKind::kNumeric, SparseColumnKind::kNumeric};
  for (int c = 0; c < 4; ++c) {
    downpour::data::SparseColumn column;
    column.name = std::string(1, static_cast<char>('a' + c));
    column.kind = kinds[c];
    if (c == 3) column.quantile_buckets = 3;
    sparse_csv.columns.push_back(column);
  }
  const char d = csv.delimiter;
  const std::string header =
      std::string("a") + d + "b" + d + "c" + d + "d" + d + "y\n";
  CheckSparse(
      downpour::data::ParseCsvSparse(header + text, "fuzz.csv", sparse_csv),
      "fuzz.csv", labels, max_classes);

  absl::StatusOr<std::string> gunzipped =
      downpour::data::MaybeGunzip(text, "fuzz.gz", 1 << 20);
  if (gunzipped.ok() && gunzipped->size() > (1 << 20)) {
    Fail("gunzip went past max_bytes", std::to_string(gunzipped->size()));
  }
  if (!gunzipped.ok() && !absl::IsInvalidArgument(gunzipped.status()) &&
      !absl::IsResourceExhausted(gunzipped.status())) {
    Fail("a gunzip error is not InvalidArgument",
         gunzipped.status().ToString());
  }
  return 0;
}
