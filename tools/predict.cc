// predict: applies an exported model (psctl export) to a CSV or LIBSVM file,
// with the reading options and input standardization the model was trained
// with (for a sparse model, sparse_linear, fm or wide_deep: the same hashed
// keys, column kinds and bucket boundaries), writes one row per example
// (--output: probabilities or values, margins, or classes), and prints the
// task's metrics on that file when it has labels.
//
//   bazel-bin/tools/predict --model model.npz --data test.csv --out pred.csv
//
// Scoring is model/'s: model/sparse_model.h for sparse models, and
// model/dense_model.h for dense ones (linear, mlp: the forward pass training
// runs). The file is read with worker/dataset.h's table reader (dense) or
// model::ReadSparseExamples (sparse).
//
// With --server HOST:PORT the margins come from the serving daemon (serve/,
// docs/SERVING.md) instead, in requests of at most --batch examples (dense
// models: rows of raw features; sparse ones: keys); the file is still read
// with --model's meta, and the output and metrics are otherwise the same:
// that is how to check served == offline.
//
// A --model that does not exist yet (psctl export writes it after the job's
// first checkpoint) is waited for, and with --server the daemon to answer and
// serve a model, each within --wait_s, saying on stderr what it waits for.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/exit_codes.h"
#include "common/model_spec.h"
#include "common/parse_flags.h"
#include "common/status_macros.h"
#include "model/dense_model.h"
#include "model/export.h"
#include "model/metrics.h"
#include "model/npz.h"
#include "model/sparse_model.h"
#include "proto/serve.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/security.h"
#include "rpc/server_util.h"
#include "worker/dataset.h"

ABSL_FLAG(std::string, model, "model.npz", "the exported model (psctl export)");
ABSL_FLAG(std::string, data, "",
          "the CSV or LIBSVM file to predict on, in the format the model was "
          "trained on (gzip read transparently)");
ABSL_FLAG(std::string, out, "",
          "where to write the predictions as CSV (default: stdout)");
ABSL_FLAG(std::string, output, "probability",
          "what to write per example: probability (class probabilities, "
          "the positive class's probability, or a regression's value), "
          "margin (the model's raw scores before the sigmoid or softmax; a "
          "regression's value) or class (the predicted class name: argmax, "
          "or margin > 0 for a binary model); numbers with full precision");
ABSL_FLAG(double, wait_s, 60,
          "how long to wait for a --model file that does not exist yet "
          "(psctl export writes it after the job's first checkpoint) and, "
          "with --server, for the daemon to answer and serve a model; 0 = "
          "fail at once");
ABSL_FLAG(std::string, labels, "auto",
          "whether --data has the label column: yes, no, or auto (a CSV "
          "with one column fewer than the model's features plus a label "
          "has none); metrics are printed only with labels");
ABSL_FLAG(std::string, server, "",
          "HOST:PORT of a serving daemon (serve --model ...): ask it for the "
          "margins instead of scoring locally; --model "
          "still gives the meta that reads --data. The output is the same, "
          "so it checks that the daemon serves what the file holds");
ABSL_FLAG(int, batch, 1024,
          "--server: at most this many examples per Predict request");
ABSL_FLAG(double, timeout_s, 30,
          "--server: the deadline of each request, and the least time "
          "given to the connection (the wait is max(--wait_s, --timeout_s))");
ABSL_FLAG(std::string, config, "",
          "--server: the cluster YAML whose security section (TLS, tokens) "
          "the call uses, as psctl does");
ABSL_FLAG(std::string, token_file, "",
          "--server with security tokens on: the bearer token to call with "
          "(default: security.admin_token_file of --config when readable, "
          "else security.reader_token_file)");

namespace {

using namespace downpour;

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "predict: %s\n", message.c_str());
  return code;
}

// Waits up to --wait_s for `path` to exist (psctl export replaces it by
// rename, so a file that exists is whole), saying so once on stderr.
// NotFound naming the file and the fix when it does not appear.
absl::Status WaitForModelFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return absl::OkStatus();
  const double wait_s = absl::GetFlag(FLAGS_wait_s);
  if (wait_s > 0) {
    std::fprintf(stderr,
                 "predict: waiting for %s (psctl export writes it after the "
                 "job's first checkpoint); --wait_s=%g\n",
                 path.c_str(), wait_s);
    const absl::Time deadline = absl::Now() + absl::Seconds(wait_s);
    while (absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(100));
      if (::stat(path.c_str(), &st) == 0) {
        std::fprintf(stderr, "predict: %s appeared\n", path.c_str());
        return absl::OkStatus();
      }
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "cannot open '", path, "': no such file",
      wait_s > 0 ? absl::StrCat(" after waiting ", wait_s, " s (--wait_s)")
                 : std::string(" (--wait_s=0)"),
      ". `psctl export --out ", path,
      "` writes it, after the job's first checkpoint: check that the export "
      "runs and writes there, or give a longer --wait_s"));
}

// What a line of the model's data looks like, for messages.
std::string ExpectedRows(const proto::ModelMeta& meta, int features) {
  if (meta.data().source() == DataSourceName(DataSource::kLibsvm)) {
    return "LIBSVM lines 'label index:value ...'";
  }
  return absl::StrCat("CSV rows of ", features + 1, " columns (", features,
                      " features and the label; ", features,
                      " without the label), delimiter '",
                      meta.data().delimiter(), "'",
                      meta.data().header() ? ", after a header line" : "");
}

// The number of fields of a CSV `line` split at `delimiter` ("quoted"
// fields may hold it; "" inside quotes is a quote).
int CountCsvFields(absl::string_view line, char delimiter) {
  int fields = 1;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        ++i;  // an escaped quote
      } else {
        quoted = !quoted;
      }
    } else if (c == delimiter && !quoted) {
      ++fields;
    }
  }
  return fields;
}

// Checks what can be told from the start of --data before reading it as the
// model's data: InvalidArgument "<file>:1: the file is empty; expected ..."
// for a file of nothing but blanks, and, for a CSV model,
// "<file>:<line>: has C columns; the model was trained on F features
// (+1 label) ..." when the first row (or header) has neither F + 1 columns
// nor (unless --labels yes) F. A gzip file is left to the readers.
absl::Status CheckDataShape(const proto::ModelMeta& meta,
                            const std::string& path, int features) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::OkStatus();  // the readers say why
  constexpr size_t kHead = 1 << 20;
  std::string head(kHead, '\0');
  file.read(&head[0], kHead);
  head.resize(static_cast<size_t>(file.gcount()));
  const bool whole = head.size() < kHead;
  if (head.size() >= 2 && head[0] == '\x1f' && head[1] == '\x8b') {
    return absl::OkStatus();
  }
  size_t start = head.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  if (whole && head.find_first_not_of(" \t\r\n", start) == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":1: the file is empty; expected ",
                     ExpectedRows(meta, features)));
  }
  const proto::DataFormat& f = meta.data();
  if (f.source() != DataSourceName(DataSource::kCsv)) return absl::OkStatus();
  const char delimiter = f.delimiter() == "\\t"  ? '\t'
                         : f.delimiter().empty() ? ','
                                                 : f.delimiter()[0];
  // The first non-blank line after data.skip_lines: the header, or the first
  // row; both have the file's width.
  int64_t line_number = 0;
  while (start < head.size()) {
    const size_t end = head.find('\n', start);
    if (end == std::string::npos && !whole) return absl::OkStatus();
    absl::string_view line(
        head.data() + start,
        (end == std::string::npos ? head.size() : end) - start);
    start = end == std::string::npos ? head.size() : end + 1;
    ++line_number;
    if (line_number <= f.skip_lines()) continue;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == absl::string_view::npos) continue;
    const int columns = CountCsvFields(line, delimiter);
    const std::string mode = absl::GetFlag(FLAGS_labels);
    const bool fits = (mode != "no" && columns == features + 1) ||
                      (mode != "yes" && columns == features);
    if (fits) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", line_number, ": has ", columns, " column",
        columns == 1 ? "" : "s", "; the model was trained on ", features,
        " features (+1 label), so expected ",
        mode == "no"    ? absl::StrCat(features, " (--labels no)")
        : mode == "yes" ? absl::StrCat(features + 1, " (--labels yes)")
                        : absl::StrCat(features + 1, ", or ", features,
                                       " without the label"),
        columns == 1
            ? "; is the delimiter right? The model's is '" + f.delimiter() + "'"
            : "; is this the file the model was trained for?"));
  }
  return absl::OkStatus();  // blank lines only after the skipped ones
}

// The file as the model's data section reads it (worker/dataset's reader);
// *labelled says whether it held labels.
absl::StatusOr<worker::Dataset> ReadData(const proto::ModelMeta& meta,
                                         const std::string& path, int inputs,
                                         Task task, bool* labelled) {
  const std::string mode = absl::GetFlag(FLAGS_labels);
  const proto::DataFormat& f = meta.data();
  absl::StatusOr<DataSource> source = ParseDataSource(f.source());
  if (!source.ok() || !IsTableSource(*source)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model was trained on data.source ", f.source(),
                     "; predict reads csv and libsvm files"));
  }
  // A model exported before data.missing was recorded holds "": error.
  absl::StatusOr<MissingPolicy> missing = f.missing().empty()
                                              ? MissingPolicy::kError
                                              : ParseMissingPolicy(f.missing());
  if (!missing.ok()) return missing.status();
  DataSection data;
  data.source = *source;
  data.header = f.header();
  data.label_column = f.label_column();
  data.delimiter = f.delimiter();
  data.skip_lines = f.skip_lines();
  data.missing = *missing;
  data.zero_based = f.zero_based();
  const std::vector<std::string> classes(meta.class_names().begin(),
                                         meta.class_names().end());
  // LIBSVM lines always start with a label.
  *labelled = mode != "no" || data.source == DataSource::kLibsvm;
  absl::StatusOr<worker::Dataset> table =
      worker::ReadTableFile(data, path, task, classes, inputs, *labelled);
  if (mode == "auto" && data.source == DataSource::kCsv && table.ok() &&
      table->dim == inputs - 1) {
    *labelled = false;  // the "label" was the last feature
    table = worker::ReadTableFile(data, path, task, classes, inputs, false);
  }
  return table;
}

// --output, checked against the task: class needs a classification model.
absl::Status CheckOutputFlag(Task task) {
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output == "class" && task == Task::kRegression) {
    return absl::InvalidArgumentError(
        "--output class needs a classification model; this one is a "
        "regression (use --output probability or margin: its value)");
  }
  return absl::OkStatus();
}

// Class c's name as the model's meta has it (its index when it has none),
// quoted for CSV when it holds a comma, quote or line break.
std::string ClassName(const proto::ModelMeta& meta, int c) {
  std::string name =
      c < meta.class_names_size() ? meta.class_names(c) : absl::StrCat(c);
  if (name.find_first_of(",\"\r\n") == std::string::npos) return name;
  std::string quoted = "\"";
  for (char ch : name) {
    if (ch == '"') quoted += '"';
    quoted += ch;
  }
  return quoted + "\"";
}

// The predictions as CSV, by --output: a header, then one row per example.
// probability: p_<class> per class (softmax), p_<positive class> (sigmoid)
// or prediction (regression's value); margin: margin_<class> per class,
// margin, or prediction; class: class. Probabilities are computed in double
// from the float margins and written with %.17g, margins with %.9g (a float
// round-trips), so nothing is rounded to 0 or 1 on the way out and metrics
// recomputed from the file are the printed ones.
std::string PredictionsCsv(const proto::ModelMeta& meta, Task task, int64_t n,
                           int k, const std::vector<float>& margins) {
  const std::string output = absl::GetFlag(FLAGS_output);
  std::string text;
  if (output == "class") {
    text = "class\n";
  } else if (task == Task::kRegression) {
    text = "prediction\n";
  } else if (task == Task::kBinary) {
    text = output == "margin"
               ? "margin\n"
               : absl::StrCat("p_",
                              meta.class_names_size() == 2 ? ClassName(meta, 1)
                                                           : std::string("1"),
                              "\n");
  } else {
    for (int c = 0; c < k; ++c) {
      absl::StrAppend(&text, c > 0 ? "," : "",
                      output == "margin" ? "margin_" : "p_",
                      ClassName(meta, c));
    }
    text += "\n";
  }
  for (int64_t i = 0; i < n; ++i) {
    const float* z = margins.data() + i * k;
    if (output == "class") {
      const int c = task == Task::kBinary
                        ? (z[0] > 0 ? 1 : 0)
                        : static_cast<int>(std::max_element(z, z + k) - z);
      absl::StrAppend(&text, ClassName(meta, c), "\n");
      continue;
    }
    if (output == "margin" || task == Task::kRegression) {
      for (int c = 0; c < k; ++c) {
        absl::StrAppendFormat(&text, "%s%.9g", c > 0 ? "," : "", z[c]);
      }
    } else if (task == Task::kBinary) {
      absl::StrAppendFormat(&text, "%.17g",
                            1 / (1 + std::exp(-static_cast<double>(z[0]))));
    } else {
      const double max = *std::max_element(z, z + k);
      double sum = 0;
      for (int c = 0; c < k; ++c) sum += std::exp(z[c] - max);
      for (int c = 0; c < k; ++c) {
        absl::StrAppendFormat(&text, "%s%.17g", c > 0 ? "," : "",
                              std::exp(z[c] - max) / sum);
      }
    }
    text += "\n";
  }
  return text;
}

// Prints the metrics of `margins` against labels `y` of the file `data`
// (when labelled), then writes the predictions (--output) to --out or stdout.
int Finish(const proto::ModelMeta& meta, const std::string& data, Task task,
           int64_t n, int k, bool labelled, const float* y,
           const std::vector<float>& margins) {
  if (labelled) {
    absl::Status ok = model::CheckTargets(task, y, n, k);
    if (!ok.ok()) return Fail(std::string(ok.message()), kExitConfig);
    const model::Metrics m =
        model::ComputeMetrics(task, margins.data(), y, n, k);
    std::fprintf(stderr, "predict: metrics on %s (%ld examples): %s\n",
                 data.c_str(), static_cast<long>(n),
                 model::FormatMetrics(m.Named(task)).c_str());
  }
  const std::string text = PredictionsCsv(meta, task, n, k, margins);
  const std::string path = absl::GetFlag(FLAGS_out);
  if (path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream file(path, std::ios::binary);
  file << text;
  if (!file.flush()) return Fail(absl::StrCat("cannot write ", path), 1);
  std::fprintf(stderr, "predict: wrote %s (%ld rows)\n", path.c_str(),
               static_cast<long>(n));
  return 0;
}

template <typename T>
std::string Bytes(const T* data, size_t n) {
  return std::string(reinterpret_cast<const char*>(data), n * sizeof(T));
}

// How `predict --server` cuts the file into requests: EndOf(from) is the
// end of the request that starts at example `from` (at least from + 1), and
// Fill writes examples [from, to) into a request.
struct RequestPlan {
  int64_t rows = 0;  // examples in the file
  int outputs = 1;   // margins per example
  std::function<int64_t(int64_t from)> end_of;
  std::function<void(int64_t from, int64_t to, proto::PredictRequest*)> fill;
};

// Requests of at most this many bytes.
constexpr size_t kMaxRequestBytes = 4 << 20;

// The plan of a sparse file: keys, values, offsets and fields.
RequestPlan SparsePlan(const data::SparseDataset& rows, int batch) {
  RequestPlan plan;
  plan.rows = rows.rows();
  plan.end_of = [&rows, batch](int64_t from) {
    // Examples [from, to): at most `batch`, and no more bytes than fit.
    int64_t to = from + 1;
    while (to < rows.rows() && to - from < batch &&
           (rows.offsets[to + 1] - rows.offsets[from]) * 14 + (to - from) * 4 <
               static_cast<int64_t>(kMaxRequestBytes)) {
      ++to;
    }
    return to;
  };
  plan.fill = [&rows](int64_t from, int64_t to,
                      proto::PredictRequest* request) {
    const int64_t first = rows.offsets[from];
    const size_t n = static_cast<size_t>(rows.offsets[to] - first);
    std::vector<uint32_t> offsets;
    offsets.reserve(to - from + 1);
    for (int64_t r = from; r <= to; ++r) {
      offsets.push_back(static_cast<uint32_t>(rows.offsets[r] - first));
    }
    request->set_keys(Bytes(rows.keys.data() + first, n));
    request->set_values(Bytes(rows.values.data() + first, n));
    request->set_offsets(Bytes(offsets.data(), offsets.size()));
    if (!rows.fields.empty()) {
      request->set_fields(Bytes(rows.fields.data() + first, n));
    }
  };
  return plan;
}

// The plan of a dense file: rows of `features` raw values (the daemon
// standardizes them).
RequestPlan DensePlan(const float* x, int64_t n, int features, int outputs,
                      int batch) {
  RequestPlan plan;
  plan.rows = n;
  plan.outputs = outputs;
  const int64_t fit = std::max<int64_t>(
      1, static_cast<int64_t>(kMaxRequestBytes) / (4 * features));
  plan.end_of = [n, batch, fit](int64_t from) {
    return std::min(n, from + std::min<int64_t>(batch, fit));
  };
  plan.fill = [x, features](int64_t from, int64_t to,
                            proto::PredictRequest* request) {
    request->set_dense(Bytes(x + from * features, (to - from) * features));
    request->set_features(static_cast<uint32_t>(features));
  };
  return plan;
}

// Waits for the daemon at `server` to answer (within max(--wait_s,
// --timeout_s)) and to serve a model (within --wait_s), saying on stderr
// what it waits for: a daemon started beside a training job has no snapshot
// until psctl export writes the first file. Connected first, so that a wrong
// address or TLS setup is one clear error, and a slow handshake on a loaded
// machine is no failed request.
absl::Status WaitUntilServing(grpc::Channel& channel,
                              proto::Predictor::Stub& stub,
                              const std::string& server) {
  const double wait_s = std::max(0.0, absl::GetFlag(FLAGS_wait_s));
  const double timeout_s = absl::GetFlag(FLAGS_timeout_s);
  const absl::Time start = absl::Now();
  const double connect_s = std::max(wait_s, timeout_s);
  if (!channel.WaitForConnected(DeadlineIn(std::min(1.0, connect_s)))) {
    std::fprintf(stderr,
                 "predict: waiting for the serving daemon at %s to answer "
                 "(serve --listen %s); --wait_s=%g\n",
                 server.c_str(), server.c_str(), wait_s);
    if (!channel.WaitForConnected(DeadlineIn(
            connect_s - absl::ToDoubleSeconds(absl::Now() - start)))) {
      return absl::UnavailableError(absl::StrCat(
          "--server ", server, ": no connection within ", connect_s,
          " s (max of --wait_s and --timeout_s): is `serve` listening "
          "there? With TLS, give the cluster's --config"));
    }
  }
  const absl::Time deadline = start + absl::Seconds(wait_s);
  bool said = false;
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(timeout_s));
    context.set_wait_for_ready(true);
    proto::ServeStatusResponse reply;
    const grpc::Status status =
        stub.ServeStatus(&context, proto::ServeStatusRequest(), &reply);
    if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return FromGrpcStatus(status,
                            absl::StrCat("--server ", server, ": ServeStatus"));
    }
    if (status.ok() && reply.loaded()) return absl::OkStatus();
    const std::string what =
        status.ok()
            ? absl::StrCat("it serves no model yet: it waits for ",
                           reply.model_path(), ", which psctl export writes")
            : absl::StrCat("it answers UNAVAILABLE: ", status.error_message());
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "--server ", server, ": no model served",
          wait_s > 0 ? absl::StrCat(" after waiting ", wait_s, " s (--wait_s)")
                     : std::string(" (--wait_s=0)"),
          "; ", what,
          ". Check that the export runs, or give a longer --wait_s"));
    }
    if (!said) {
      std::fprintf(stderr,
                   "predict: waiting for the daemon at %s to serve a model "
                   "(%s); --wait_s=%g\n",
                   server.c_str(), what.c_str(), wait_s);
      said = true;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

// The margins of every example of `plan` from the daemon at --server, in
// requests of at most --batch examples and about 4 MiB. Says on stderr when
// the daemon's snapshot is not the one --model holds (other meta updates)
// or changed between requests.
absl::StatusOr<std::vector<float>> ServedMargins(const proto::ModelMeta& meta,
                                                 const RequestPlan& plan) {
  const std::string server = absl::GetFlag(FLAGS_server);
  const double timeout_s = absl::GetFlag(FLAGS_timeout_s);
  std::shared_ptr<grpc::Channel> channel = MakeChannel(server);
  auto stub = proto::Predictor::NewStub(channel);
  RETURN_IF_ERROR(WaitUntilServing(*channel, *stub, server));
  const int k = plan.outputs;
  std::vector<float> margins;
  margins.reserve(static_cast<size_t>(plan.rows) * k);
  std::vector<uint64_t> snapshots, updates;
  for (int64_t from = 0; from < plan.rows;) {
    const int64_t to = plan.end_of(from);
    proto::PredictRequest request;
    plan.fill(from, to, &request);
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(timeout_s));
    context.set_wait_for_ready(true);  // through a reconnect, not failed
    proto::PredictResponse reply;
    const grpc::Status status = stub->Predict(&context, request, &reply);
    if (!status.ok()) {
      return FromGrpcStatus(
          status, absl::StrCat("--server ", server, ": Predict of examples ",
                               from, "..", to - 1));
    }
    if (reply.margins().size() != static_cast<size_t>(to - from) * k * 4) {
      return absl::InternalError(
          absl::StrCat("--server ", server, ": ", reply.margins().size(),
                       " bytes of margins for ", to - from, " examples"));
    }
    const size_t at = margins.size();
    margins.resize(at + (to - from) * k);
    std::memcpy(margins.data() + at, reply.margins().data(),
                reply.margins().size());
    if (snapshots.empty() || snapshots.back() != reply.snapshot()) {
      snapshots.push_back(reply.snapshot());
      updates.push_back(reply.snapshot_updates());
    }
    from = to;
  }
  if (snapshots.size() > 1) {
    std::fprintf(stderr,
                 "predict: note: %s swapped snapshots while answering "
                 "(snapshots %s): the predictions mix models\n",
                 server.c_str(), absl::StrJoin(snapshots, ", ").c_str());
  }
  for (uint64_t u : updates) {
    if (u != meta.updates()) {
      std::fprintf(stderr,
                   "predict: note: %s serves a model of %lu updates, --model "
                   "holds one of %lu\n",
                   server.c_str(), static_cast<unsigned long>(u),
                   static_cast<unsigned long>(meta.updates()));
      break;
    }
  }
  return margins;
}

// --batch, checked.
absl::StatusOr<int> BatchFlag() {
  const int batch = absl::GetFlag(FLAGS_batch);
  if (batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch must be at least 1, got ", batch));
  }
  return batch;
}

// A sparse model (sparse_linear, fm, wide_deep): the file read into keys as
// training read its data (model/sparse_model.h), margins, then as a dense
// model's outputs.
int PredictSparse(const std::string& model_path,
                  std::vector<model::NpyArray> arrays) {
  absl::StatusOr<model::SparseModel> sparse =
      model::SparseModelFromArrays(model_path, std::move(arrays));
  if (!sparse.ok()) {
    return Fail(std::string(sparse.status().message()), kExitConfig);
  }
  const proto::ModelMeta& meta = sparse->meta;
  absl::StatusOr<Task> task = ParseTask(meta.task());
  if (!task.ok()) {
    return Fail(std::string(task.status().message()), kExitConfig);
  }
  const absl::Status output = CheckOutputFlag(*task);
  if (!output.ok()) return Fail(std::string(output.message()), kExitConfig);
  const std::string data = absl::GetFlag(FLAGS_data);
  const std::string mode = absl::GetFlag(FLAGS_labels);
  const bool libsvm =
      meta.data().source() == DataSourceName(DataSource::kLibsvm);
  const absl::Status shape =
      CheckDataShape(meta, data, meta.data().columns_size());
  if (!shape.ok()) return Fail(std::string(shape.message()), kExitConfig);
  // LIBSVM lines always start with a label; a CSV file without the label
  // column fails to read as labelled (its columns do not match), so "auto"
  // then reads it as unlabelled.
  bool labelled = mode != "no" || libsvm;
  absl::StatusOr<data::SparseDataset> rows =
      model::ReadSparseExamples(meta, data, labelled);
  if (!rows.ok() && mode == "auto" && !libsvm) {
    absl::StatusOr<data::SparseDataset> unlabelled =
        model::ReadSparseExamples(meta, data, false);
    if (unlabelled.ok()) {
      labelled = false;
      rows = std::move(unlabelled);
    }
  }
  if (!rows.ok()) {
    return Fail(std::string(rows.status().message()), kExitConfig);
  }
  std::vector<float> margins;
  if (absl::GetFlag(FLAGS_server).empty()) {
    margins = model::Margins(*sparse, *rows);
  } else {
    absl::StatusOr<int> batch = BatchFlag();
    absl::StatusOr<std::vector<float>> served =
        batch.ok() ? ServedMargins(meta, SparsePlan(*rows, *batch))
                   : batch.status();
    if (!served.ok()) return Fail(std::string(served.status().message()), 1);
    margins = *std::move(served);
  }
  return Finish(meta, data, *task, rows->rows(), 1, labelled, rows->y.data(),
                margins);
}

// A dense model (linear, mlp): the file read as training read its data, then
// model::DenseScorer (standardization and the training forward pass) here
// or at --server.
int PredictDense(const std::string& model_path,
                 std::vector<model::NpyArray> arrays) {
  absl::StatusOr<model::ExportedModel> exported =
      model::ModelFromArrays(model_path, std::move(arrays));
  if (!exported.ok()) {
    return Fail(std::string(exported.status().message()), kExitConfig);
  }
  absl::StatusOr<std::unique_ptr<model::DenseScorer>> scorer =
      model::DenseScorer::Create(*std::move(exported));
  if (!scorer.ok()) {
    return Fail(std::string(scorer.status().message()), kExitConfig);
  }
  const model::DenseScorer& dense = **scorer;
  const proto::ModelMeta& meta = dense.meta();
  const int inputs = dense.features();
  const std::string data = absl::GetFlag(FLAGS_data);
  const absl::Status output = CheckOutputFlag(dense.task());
  if (!output.ok()) return Fail(std::string(output.message()), kExitConfig);
  const absl::Status shape = CheckDataShape(meta, data, inputs);
  if (!shape.ok()) return Fail(std::string(shape.message()), kExitConfig);
  bool labelled = false;
  absl::StatusOr<worker::Dataset> table =
      ReadData(meta, data, inputs, dense.task(), &labelled);
  if (!table.ok())
    return Fail(std::string(table.status().message()), kExitConfig);
  if (table->dim != inputs) {
    return Fail(absl::StrCat(data, " has ", table->dim,
                             " features; the model was trained on ", inputs),
                kExitConfig);
  }
  const int64_t n = table->size();
  const int k = dense.outputs();
  std::vector<float> out;
  if (absl::GetFlag(FLAGS_server).empty()) {
    out.resize(static_cast<size_t>(n) * k);
    dense.Margins(table->x.data(), n, out.data());
  } else {
    absl::StatusOr<int> batch = BatchFlag();
    absl::StatusOr<std::vector<float>> served =
        batch.ok() ? ServedMargins(
                         meta, DensePlan(table->x.data(), n, inputs, k, *batch))
                   : batch.status();
    if (!served.ok()) return Fail(std::string(served.status().message()), 1);
    out = *std::move(served);
  }
  return Finish(meta, data, dense.task(), n, k, labelled, table->y.data(), out);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "predict --model model.npz --data FILE [--out predictions.csv] "
      "[--output probability|margin|class] [--server HOST:PORT] "
      "[--wait_s 60]\n\n"
      "Applies a model exported by `psctl export` to a CSV or LIBSVM file "
      "read as the model's training data was (delimiter, header, label "
      "column, standardization; for a sparse model (sparse_linear, fm, "
      "wide_deep) the same hashed "
      "keys and buckets), writes one row per example (--output: class "
      "probabilities, the probability of the positive class, or the value; "
      "the raw margins; or the predicted class) and prints the task's "
      "metrics on that file when it has labels. A --model that does not "
      "exist yet is waited for up to --wait_s (psctl export writes it after "
      "the job's first checkpoint). With --server the margins come from a "
      "serving daemon (docs/SERVING.md), waited for too.");
  ParseFlags(argc, argv);
  const std::string labels = absl::GetFlag(FLAGS_labels);
  if (labels != "auto" && labels != "yes" && labels != "no") {
    return Fail(
        absl::StrCat("--labels must be auto, yes or no, got '", labels, "'"),
        kExitConfig);
  }
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "probability" && output != "margin" && output != "class") {
    return Fail(absl::StrCat("--output must be probability, margin or class, "
                             "got '",
                             output, "'"),
                kExitConfig);
  }
  if (absl::GetFlag(FLAGS_data).empty()) {
    return Fail("give --data FILE (a CSV or LIBSVM file)", kExitConfig);
  }
  if (!absl::GetFlag(FLAGS_config).empty()) {
    // TLS and a token from the config's security section, as psctl.
    absl::StatusOr<Config> config = LoadConfig(absl::GetFlag(FLAGS_config));
    if (!config.ok()) {
      return Fail(std::string(config.status().message()), kExitConfig);
    }
    const absl::Status installed = InstallSecurity(
        config->security, "client", ClientRole(config->security),
        absl::GetFlag(FLAGS_token_file));
    if (!installed.ok()) {
      return Fail(std::string(installed.message()), kExitConfig);
    }
  } else if (!absl::GetFlag(FLAGS_token_file).empty()) {
    return Fail(
        "--token_file needs --config (its security section says how to "
        "reach the server)",
        kExitConfig);
  }
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const absl::Status present = WaitForModelFile(model_path);
  if (!present.ok()) return Fail(std::string(present.message()), kExitConfig);
  // Read once; the meta says which model it holds.
  absl::StatusOr<std::vector<model::NpyArray>> arrays =
      model::ReadNpz(model_path);
  if (!arrays.ok()) {
    return Fail(std::string(arrays.status().message()), kExitConfig);
  }
  absl::StatusOr<proto::ModelMeta> kind =
      model::MetaFromArrays(model_path, *arrays);
  if (!kind.ok()) {
    return Fail(std::string(kind.status().message()), kExitConfig);
  }
  if (model::IsSparseMeta(*kind)) {
    return PredictSparse(model_path, *std::move(arrays));
  }
  return PredictDense(model_path, *std::move(arrays));
}
