#include "worker/line_parsers.h"

#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "data/criteo_parser.h"
#include "data/libsvm_parser.h"
#include "worker/sparse_batches.h"
#include "worker/sparse_data.h"

namespace downpour::worker {
namespace {

data::LabelMode LabelsOf(Task task) {
  return task == Task::kRegression ? data::LabelMode::kReal
                                   : data::LabelMode::kClass;
}

// Classification from a stream needs its labels listed.
absl::Status CheckClasses(const DataSection& data, Task task) {
  if (task == Task::kRegression || data.classes.size() == 2) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "a streamed ", DataSourceName(data.source),
      " file's labels must be listed: set data.classes to its two labels, the "
      "positive one second (e.g. [-1, +1], [0, 1] or [no, yes]); got ",
      data.classes.size(), " classes"));
}

LineParser LibsvmParser(const DataSection& data, Task task) {
  data::internal::LibsvmRules rules;
  rules.sparse = true;
  rules.labels = LabelsOf(task);
  rules.classes = data.classes;
  return [rules](absl::string_view text, const std::string& name,
                 int64_t first_line, data::SparseDataset* out) {
    data::internal::LibsvmRules r = rules;
    r.first_line = first_line;
    data::internal::LibsvmRows rows;
    RETURN_IF_ERROR(data::internal::ParseLibsvmRows(text, name, r, &rows));
    for (int64_t i = 0; i < rows.data.rows(); ++i) {
      AppendRow(rows.data, i, out);
    }
    return absl::OkStatus();
  };
}

// The bytes of text's preamble (skip_lines lines, blank lines, then the
// header line) and, in *lines, how many lines they are.
size_t PreambleEnd(absl::string_view text, int skip_lines, int64_t* lines) {
  size_t at = 0;
  *lines = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    const size_t next = end == absl::string_view::npos ? text.size() : end + 1;
    const absl::string_view line = text.substr(at, next - at);
    at = next;
    if (++*lines <= skip_lines) continue;
    if (!absl::StripAsciiWhitespace(line).empty()) break;  // the header
  }
  return at;
}

// `error` ("name:L:..." with L counted from the header the parser was given)
// with L + delta.
absl::Status Renumber(const absl::Status& error, const std::string& name,
                      int64_t delta) {
  absl::string_view rest = error.message();
  if (!absl::ConsumePrefix(&rest, name + ":")) return error;
  const size_t colon = rest.find(':');
  int64_t line = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(rest.substr(0, colon), &line)) {
    return error;
  }
  return absl::Status(
      error.code(), absl::StrCat(name, ":", line + delta, rest.substr(colon)));
}

struct CsvStream {
  data::SparseCsvOptions options;  // header first, no lines skipped
  std::string header;              // the header line, no line end
  int skip_lines = 0;
};

// Each chunk is parsed after the header; a chunk that starts a file has its
// own preamble and header taken off first.
LineParser CsvParser(std::shared_ptr<const CsvStream> csv) {
  return [csv](absl::string_view text, const std::string& name,
               int64_t first_line, data::SparseDataset* out) -> absl::Status {
    int64_t rows_from = first_line;  // the line number of text's first row
    if (first_line == 1) {
      int64_t lines = 0;
      text.remove_prefix(PreambleEnd(text, csv->skip_lines, &lines));
      rows_from = 1 + lines;
    }
    if (absl::StripAsciiWhitespace(text).empty()) return absl::OkStatus();
    absl::StatusOr<data::SparseDataset> rows = data::ParseCsvSparse(
        absl::StrCat(csv->header, "\n", text), name, csv->options);
    if (!rows.ok()) {
      // Line 2 of what was parsed is line rows_from of the file.
      return rows_from > 0 ? Renumber(rows.status(), name, rows_from - 2)
                           : rows.status();
    }
    for (int64_t r = 0; r < rows->rows(); ++r) AppendRow(*rows, r, out);
    return absl::OkStatus();
  };
}

absl::StatusOr<LineParser> MakeCsvParser(
    const DataSection& data, Task task,
    const std::vector<data::InputFile>& files) {
  if (!data.bucketize.empty()) {
    return absl::InvalidArgumentError(
        "data.bucketize is not streamed: its quantile boundaries need the "
        "whole file first; list those columns in data.numeric (the number as "
        "the value), or set data.stream: false");
  }
  auto csv = std::make_shared<CsvStream>();
  csv->skip_lines = data.skip_lines;
  csv->options.csv.header = true;
  csv->options.csv.label_column = data.label_column;
  csv->options.csv.delimiter = DelimiterChar(data);
  csv->options.csv.labels = LabelsOf(task);
  csv->options.csv.classes = data.classes;
  csv->options.columns = SparseColumnsOf(data);
  // The header, from the first chunk of the first file; that chunk parsed
  // now, so that a bad header or first row stops the worker before training.
  data::PartReader reader({files[0]}, data::PlanParts({files[0]}, 1)[0]);
  data::TextChunk first;
  ASSIGN_OR_RETURN(const bool any, reader.Next(&first));
  int64_t lines = 0;
  const absl::string_view text = any ? first.text : absl::string_view();
  // The preamble without its last line end; its last line is the header.
  const absl::string_view preamble = absl::StripTrailingAsciiWhitespace(
      text.substr(0, PreambleEnd(text, data.skip_lines, &lines)));
  const size_t header_at = preamble.rfind('\n');
  csv->header = std::string(preamble.substr(
      header_at == absl::string_view::npos ? 0 : header_at + 1));
  if (csv->header.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(files[0].path,
                     ":1:1: the file is empty; a streamed CSV file starts "
                     "with its header line"));
  }
  LineParser parse = CsvParser(csv);
  data::SparseDataset scratch;
  RETURN_IF_ERROR(parse(text, files[0].path, 1, &scratch));
  return parse;
}

}  // namespace

absl::StatusOr<LineParser> MakeLineParser(
    const DataSection& data, Task task,
    const std::vector<data::InputFile>& files) {
  if (data.source == DataSource::kCriteo) {
    if (task != Task::kBinary) {
      return absl::InvalidArgumentError(
          "data.source criteo holds 0/1 click labels: set model.task: binary");
    }
    return LineParser([](absl::string_view text, const std::string& name,
                         int64_t first_line, data::SparseDataset* out) {
      return data::ParseCriteoRows(text, name, first_line, out);
    });
  }
  if (data.source != DataSource::kLibsvm && data.source != DataSource::kCsv) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.source ", DataSourceName(data.source),
                     " is not streamed: use libsvm, csv or criteo, or set "
                     "data.stream: false"));
  }
  RETURN_IF_ERROR(CheckClasses(data, task));
  if (data.source == DataSource::kLibsvm) return LibsvmParser(data, task);
  if (files.empty()) {
    return absl::InvalidArgumentError("data.path names no file");
  }
  return MakeCsvParser(data, task, files);
}

std::vector<std::string> StreamClassNames(const DataSection& data, Task task) {
  if (task == Task::kRegression) return {};
  if (data.source == DataSource::kCriteo) return {"0", "1"};
  return data.classes;
}

std::vector<data::SparseColumn> StreamColumns(const DataSection& data) {
  if (data.source != DataSource::kCsv) return {};
  return SparseColumnsOf(data);
}

}  // namespace downpour::worker
