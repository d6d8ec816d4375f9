// The serving core: snapshots of an exported model, requests scored against
// them, and the reload thread that swaps a changed file in.
#include "serve/model_server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "model/metrics.h"
#include "serve/examples.h"

namespace downpour::serve {
namespace {

// `text` with every byte outside printable ASCII written as \xNN.
std::string PrintableAscii(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    }
  }
  return out;
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the reply's bytes are little-endian and copied as they are");

spdlog::logger* L() { return Log(Logger::kServe); }

// The file at `path`, opened, and its version: NotFound when it does not
// exist, PermissionDenied or Unavailable (the errno's text) when it cannot be
// opened.
struct OpenedFile {
  std::unique_ptr<ScopedFd> fd;
  FileVersion version;
};

absl::StatusOr<OpenedFile> Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    const std::string message =
        absl::StrCat("cannot open '", path, "': ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(message);
    }
    return absl::UnavailableError(message);
  }
  OpenedFile file;
  file.fd = std::make_unique<ScopedFd>(fd);
  file.version.device = st.st_dev;
  file.version.inode = st.st_ino;
  file.version.size = static_cast<int64_t>(st.st_size);
  file.version.mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return file;
}

template <typename T>
void Encode(const std::vector<T>& values, std::string* bytes) {
  bytes->resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(&(*bytes)[0], values.data(), bytes->size());
}

double UnixSeconds(absl::Time t) { return absl::ToUnixMicros(t) / 1e6; }

}  // namespace

absl::StatusOr<std::unique_ptr<ModelServer>> ModelServer::Create(
    Options options) {
  if (options.model_path.empty()) {
    return absl::InvalidArgumentError(
        "no model file given: pass --model PATH (the .npz `psctl export` "
        "writes)");
  }
  if (options.max_examples < 1 || options.max_request_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_examples and --max_request_bytes must be at least 1, got ",
        options.max_examples, " and ", options.max_request_bytes));
  }
  if (options.reload_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reload_interval_s must be above 0, got ",
                     absl::ToDoubleSeconds(options.reload_interval)));
  }
  std::unique_ptr<ModelServer> server(new ModelServer(std::move(options)));
  absl::StatusOr<OpenedFile> file = Open(server->options_.model_path);
  if (absl::IsNotFound(file.status())) {
    SPDLOG_LOGGER_WARN(L(),
                       "{} does not exist yet: not serving until it appears "
                       "(psctl export writes it)",
                       server->options_.model_path);
    absl::MutexLock lock(&server->reload_mu_);
    server->file_missing_logged_ = true;
    return server;
  }
  if (!file.ok()) return file.status();
  absl::StatusOr<std::shared_ptr<const Snapshot>> first =
      server->Load(&file->fd, file->version);
  if (!first.ok()) return first.status();
  absl::MutexLock lock(&server->mu_);
  server->current_ = *std::move(first);
  server->loads_ = 1;
  return server;
}

ModelServer::ModelServer(Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()) {}

ModelServer::~ModelServer() { StopReloading(); }

absl::StatusOr<std::shared_ptr<const Snapshot>> ModelServer::Load(
    std::unique_ptr<ScopedFd>* fd, const FileVersion& version) const {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<const Scorer>> scorer =
      LoadScorer(options_.model_path);
  if (!scorer.ok()) return scorer.status();
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->scorer = *std::move(scorer);
  snapshot->file = version;
  snapshot->file_fd = std::move(*fd);
  snapshot->loaded_at = clock_->Now();
  snapshot->file_mtime = absl::FromUnixNanos(version.mtime_ns);
  {
    absl::MutexLock lock(&mu_);
    snapshot->number = loads_ + 1;
  }
  SPDLOG_LOGGER_INFO(
      L(),
      "loaded {} as snapshot {}: {} rows, {} updates, origin '{}', {}, in "
      "{:.3f} s",
      options_.model_path, snapshot->number, snapshot->scorer->rows(),
      snapshot->scorer->meta().updates(), snapshot->scorer->meta().origin(),
      snapshot->scorer->meta().type(),
      absl::ToDoubleSeconds(absl::Now() - start));
  return std::shared_ptr<const Snapshot>(std::move(snapshot));
}

absl::Status ModelServer::ReloadIfChanged() {
  absl::MutexLock reload(&reload_mu_);
  absl::StatusOr<OpenedFile> file = Open(options_.model_path);
  std::shared_ptr<const Snapshot> serving = current();
  if (absl::IsNotFound(file.status())) {
    if (!file_missing_logged_) {
      file_missing_logged_ = true;
      if (serving != nullptr) {
        SPDLOG_LOGGER_WARN(L(), "{} was removed: snapshot {} keeps serving",
                           options_.model_path, serving->number);
      }
    }
    return absl::OkStatus();
  }
  file_missing_logged_ = false;
  absl::Status failure;
  if (file.ok()) {
    const FileVersion version = file->version;
    if (serving != nullptr && serving->file == version) return absl::OkStatus();
    if (failed_fd_ != nullptr && failed_ == version) {
      return absl::OkStatus();  // reported already
    }
    absl::StatusOr<std::shared_ptr<const Snapshot>> loaded =
        Load(&file->fd, version);
    if (loaded.ok()) {
      failed_ = FileVersion();
      failed_fd_.reset();
      {
        absl::MutexLock lock(&mu_);
        // Requests that took the old snapshot keep it until they end.
        current_ = *std::move(loaded);
        ++loads_;
        if (serving != nullptr) ++reloads_;
      }
      if (on_load_) on_load_();
      return absl::OkStatus();
    }
    failure = loaded.status();
    failed_ = version;
    failed_fd_ = std::move(file->fd);  // kept open: see FileVersion
  } else {
    failure = file.status();  // not readable; retried every interval
  }
  uint64_t keeps = 0;
  {
    absl::MutexLock lock(&mu_);
    ++reload_failures_;
    // The message may quote the file's bytes; a proto string field must be
    // UTF-8 or clients cannot parse ServeStatus.
    last_error_ = PrintableAscii(failure.message());
    last_error_at_ = clock_->Now();
    keeps = current_ == nullptr ? 0 : current_->number;
  }
  if (keeps > 0) {
    SPDLOG_LOGGER_WARN(L(), "reload failed, snapshot {} keeps serving: {}",
                       keeps, std::string(failure.message()));
  } else {
    SPDLOG_LOGGER_ERROR(L(), "load failed, still no snapshot to serve: {}",
                        std::string(failure.message()));
  }
  return failure;
}

void ModelServer::StartReloading(std::function<void()> on_load,
                                 std::function<void()> on_tick) {
  if (reloader_.joinable() || stop_.HasBeenNotified()) return;
  on_load_ = std::move(on_load);
  on_tick_ = std::move(on_tick);
  reloader_ = std::thread([this] {
    if (options_.reload_nice != 0 &&
        ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)),
                      options_.reload_nice) != 0) {
      SPDLOG_LOGGER_WARN(L(),
                         "cannot lower the reload thread's priority (nice "
                         "{}): {}; loads compete with requests",
                         options_.reload_nice, std::strerror(errno));
    }
    while (!clock_->WaitForNotificationWithTimeout(&stop_,
                                                   options_.reload_interval)) {
      // The error is logged and kept for Status; the next interval tries
      // again once the file changes.
      ReloadIfChanged().IgnoreError();
      if (on_tick_) on_tick_();
    }
  });
}

void ModelServer::StopReloading() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (reloader_.joinable()) reloader_.join();
}

std::shared_ptr<const Snapshot> ModelServer::current() const {
  absl::ReaderMutexLock lock(&mu_);
  return current_;
}

absl::Status ModelServer::Predict(const proto::PredictRequest& request,
                                  proto::PredictResponse* response) {
  const absl::Time start = absl::Now();
  Examples examples;
  RequestLimits limits;
  limits.max_examples = options_.max_examples;
  limits.max_request_bytes = options_.max_request_bytes;
  if (absl::Status ok = DecodeExamples(request, limits, &examples); !ok.ok()) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return ok;
  }
  // One snapshot answers the whole request, whatever swaps meanwhile.
  const std::shared_ptr<const Snapshot> snapshot = current();
  if (snapshot == nullptr) {
    unavailable_.fetch_add(1, std::memory_order_relaxed);
    return absl::UnavailableError(
        absl::StrCat("no snapshot loaded yet: waiting for ",
                     options_.model_path, " (psctl export writes it)"));
  }
  const Scorer& scorer = *snapshot->scorer;
  std::vector<float> margins;
  int64_t misses = 0;
  if (absl::Status ok = scorer.Score(examples, &margins, &misses); !ok.ok()) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return ok;
  }
  const int64_t n = examples.count;
  const int k = scorer.outputs();
  Encode(margins, response->mutable_margins());
  if (scorer.task() == Task::kRegression) {
    response->clear_probabilities();
  } else {
    model::OutputsToPredictions(scorer.task(), n, k, margins.data());
    Encode(margins, response->mutable_probabilities());
  }
  response->set_outputs(static_cast<uint32_t>(k));
  response->set_snapshot(snapshot->number);
  response->set_snapshot_updates(scorer.meta().updates());
  response->set_misses(static_cast<uint64_t>(misses));
  requests_.fetch_add(1, std::memory_order_relaxed);
  examples_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  keys_.fetch_add(static_cast<uint64_t>(examples.keys.size()),
                  std::memory_order_relaxed);
  misses_.fetch_add(static_cast<uint64_t>(misses), std::memory_order_relaxed);
  RecordLatency(absl::Now() - start);
  return absl::OkStatus();
}

void ModelServer::RecordLatency(absl::Duration d) {
  absl::MutexLock lock(&latency_mu_);
  latency_.Record(absl::ToDoubleSeconds(d));
}

void ModelServer::Status(proto::ServeStatusResponse* response) const {
  response->set_model_path(options_.model_path);
  response->set_max_examples(static_cast<uint64_t>(options_.max_examples));
  response->set_max_request_bytes(
      static_cast<uint64_t>(options_.max_request_bytes));
  response->set_reload_interval_s(
      absl::ToDoubleSeconds(options_.reload_interval));
  std::shared_ptr<const Snapshot> snapshot;
  {
    absl::ReaderMutexLock lock(&mu_);
    snapshot = current_;
    response->set_loads(loads_);
    response->set_reloads(reloads_);
    response->set_reload_failures(reload_failures_);
    response->set_last_reload_error(last_error_);
    response->set_last_reload_error_unix_s(
        last_error_at_ == absl::InfinitePast() ? 0
                                               : UnixSeconds(last_error_at_));
  }
  response->set_loaded(snapshot != nullptr);
  if (snapshot != nullptr) {
    const proto::ModelMeta& meta = snapshot->scorer->meta();
    response->set_snapshot(snapshot->number);
    response->set_loaded_at_unix_s(UnixSeconds(snapshot->loaded_at));
    response->set_snapshot_age_s(
        absl::ToDoubleSeconds(clock_->Now() - snapshot->file_mtime));
    response->set_file_bytes(static_cast<uint64_t>(snapshot->file.size));
    response->set_updates(meta.updates());
    response->set_origin(meta.origin());
    response->set_type(meta.type());
    response->set_task(meta.task());
    response->set_rows(snapshot->scorer->rows());
    response->set_embedding_rows(snapshot->scorer->embedding_rows());
  }
  const uint64_t keys = keys_.load(std::memory_order_relaxed);
  const uint64_t misses = misses_.load(std::memory_order_relaxed);
  response->set_requests(requests_.load(std::memory_order_relaxed));
  response->set_examples(examples_.load(std::memory_order_relaxed));
  response->set_keys(keys);
  response->set_misses(misses);
  response->set_miss_ratio(keys == 0 ? 0 : static_cast<double>(misses) / keys);
  response->set_rejected(rejected_.load(std::memory_order_relaxed));
  response->set_unavailable(unavailable_.load(std::memory_order_relaxed));
  absl::MutexLock lock(&latency_mu_);
  response->set_latency_p50_s(latency_.Quantile(0.5));
  response->set_latency_p99_s(latency_.Quantile(0.99));
  response->set_latency_max_s(latency_.max());
}

}  // namespace downpour::serve
