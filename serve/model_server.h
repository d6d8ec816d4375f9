// The serving core: an exported model (psctl export), sparse
// (model/sparse_model.h) or dense (model/dense_model.h), loaded as an
// immutable snapshot, predictions of request batches from it, and an atomic
// swap to a newer file when the one at the path changes. Plain C++: the gRPC
// adapter (serve/predictor_service.h) only forwards to it.
//
//   ModelServer::Options options;
//   options.model_path = "model.npz";
//   ASSIGN_OR_RETURN(std::unique_ptr<ModelServer> server,
//                    ModelServer::Create(options));  // loads it if it exists
//   server->StartReloading(/*on_load=*/nullptr);     // every reload_interval
//   proto::PredictResponse reply;
//   RETURN_IF_ERROR(server->Predict(request, &reply));
//
// A request is decoded and checked for form (serve/examples.h), then scored
// by the snapshot's Scorer (serve/scorer.h: model::SparseScorer or
// model::DenseScorer), so a served margin equals model::Margins /
// DenseScorer::Margins, `predict` and the worker's evaluation bit for bit. A
// request is answered entirely by the snapshot current when it started: a
// swap replaces a shared_ptr, and requests in flight keep theirs (at most the
// old and the new snapshot live at once, plus one being loaded).
#ifndef DOWNPOUR_SERVE_MODEL_SERVER_H_
#define DOWNPOUR_SERVE_MODEL_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/file_util.h"
#include "proto/serve.pb.h"
#include "serve/scorer.h"

namespace downpour::serve {

// Which file a snapshot came from: stat's identity and contents markers. A
// writer that renames a new file over the path changes the inode; one that
// rewrites it in place changes the size or the modification time. The file
// a version was taken from is kept open while the version is remembered, so
// that its inode cannot be recycled for a later file of the same size
// written within the file system's timestamp granularity.
struct FileVersion {
  dev_t device = 0;
  ino_t inode = 0;
  int64_t size = -1;
  int64_t mtime_ns = 0;

  bool operator==(const FileVersion& o) const {
    return device == o.device && inode == o.inode && size == o.size &&
           mtime_ns == o.mtime_ns;
  }
  bool operator!=(const FileVersion& o) const { return !(*this == o); }
};

// One loaded file: the model in its scorer, and where it came from.
// Immutable once built; shared by every request that started while it
// served.
struct Snapshot {
  Snapshot() = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  // The model (sparse or dense) and its meta.
  std::unique_ptr<const Scorer> scorer;
  uint64_t number = 0;  // the load counter: 1 for the first file loaded
  FileVersion file;     // stat of the file before it was read
  std::unique_ptr<ScopedFd> file_fd;  // that file, open (see FileVersion)
  absl::Time loaded_at;
  absl::Time file_mtime;
};

// Thread-safe: Predict and Status run on any number of threads beside the
// reload thread.
class ModelServer {
 public:
  struct Options {
    // The exported model (required). Writers must replace it by rename
    // (WriteFileAtomically in common/file_util.h; psctl export does), so a
    // reader never sees half a file.
    std::string model_path;
    // How often the reload thread stats the file (StartReloading).
    absl::Duration reload_interval = absl::Seconds(1);
    // The reload thread's nice value (Linux, per thread; 0 = as the
    // process). Loading a large model takes a core for a while (10^6 keys:
    // 0.3-1 s here); at a higher nice value requests win the CPU and the
    // swap comes later instead. Failing to set it is logged, not an error.
    int reload_nice = 10;
    // A request may hold at most this many examples ...
    int64_t max_examples = 65536;
    // ... and this many bytes of keys, values and offsets together.
    int64_t max_request_bytes = 16 << 20;
    // Loaded-at times, snapshot ages and the reload thread's waits; nullptr =
    // Clock::Real(). For tests.
    Clock* clock = nullptr;
  };

  // Loads options.model_path when it exists. A missing file is no error: the
  // server waits for it (Predict is Unavailable until a reload finds it). A
  // file that exists but cannot be read as a model returns the reader's
  // error (LoadScorer: InvalidArgument naming the file, ...), as does a model
  // whose task this server cannot answer (a multiclass sparse one).
  // InvalidArgument for an empty path or a limit below 1.
  static absl::StatusOr<std::unique_ptr<ModelServer>> Create(Options options);

  ModelServer(const ModelServer&) = delete;
  ModelServer& operator=(const ModelServer&) = delete;
  // Stops the reload thread.
  ~ModelServer();

  // Starts the thread that calls ReloadIfChanged every reload_interval.
  // `on_load` (may be null) runs after each snapshot swapped in, outside any
  // lock (the daemon turns its readiness on there); `on_tick` (may be null)
  // after each look at the file (the daemon flushes its throttled log). At
  // most once per server.
  void StartReloading(std::function<void()> on_load,
                      std::function<void()> on_tick = nullptr);
  // Stops and joins it; idempotent.
  void StopReloading();

  // Stats the file and, when it is not the one serving (nor one that already
  // failed to load), reads it and swaps it in. OK when nothing changed or the
  // new snapshot serves now; otherwise the load's error: the old snapshot
  // keeps serving, the failure is counted and kept for Status. A file that
  // vanished leaves the current snapshot serving (OK).
  absl::Status ReloadIfChanged() ABSL_LOCKS_EXCLUDED(mu_, reload_mu_);

  // Scores every example of `request` with the current snapshot into
  // `response` (margins; probabilities for a binary or multiclass model;
  // outputs per example; which snapshot). InvalidArgument naming the problem
  // for a malformed request (DecodeExamples in serve/examples.h: sizes,
  // offsets, NaN or infinite values, the limits), checked first; then
  // Unavailable "no snapshot loaded yet: waiting for PATH (psctl export
  // writes it)" before the first load; then InvalidArgument naming expected
  // and got for examples the model does not take (Scorer::Score: the other
  // form, a dense width other than the model's inputs, a field too high).
  absl::Status Predict(const proto::PredictRequest& request,
                       proto::PredictResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_, latency_mu_);

  // Fills every field of ServeStatusResponse.
  void Status(proto::ServeStatusResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_, latency_mu_);

  // The snapshot serving now (null before the first load).
  std::shared_ptr<const Snapshot> current() const ABSL_LOCKS_EXCLUDED(mu_);

  const Options& options() const { return options_; }

 private:
  explicit ModelServer(Options options);

  // Reads the file at options_.path, opened as *fd and stat'ed as
  // `version`, into a snapshot, which takes *fd when the load succeeds.
  absl::StatusOr<std::shared_ptr<const Snapshot>> Load(
      std::unique_ptr<ScopedFd>* fd, const FileVersion& version) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void RecordLatency(absl::Duration d) ABSL_LOCKS_EXCLUDED(latency_mu_);

  // Constant after construction.
  const Options options_;
  Clock* const clock_;

  // Serializes loads (the reload thread and direct callers), so that two
  // never read the file at once. Taken before mu_.
  absl::Mutex reload_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // The stat of the last file that failed to load: not read again until it
  // changes (a bad file is reported once, not every interval).
  FileVersion failed_ ABSL_GUARDED_BY(reload_mu_);
  std::unique_ptr<ScopedFd> failed_fd_ ABSL_GUARDED_BY(reload_mu_);
  bool file_missing_logged_ ABSL_GUARDED_BY(reload_mu_) = false;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::shared_ptr<const Snapshot> current_ ABSL_GUARDED_BY(mu_);
  uint64_t loads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reload_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time last_error_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  // Traffic counters, bumped without a lock.
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> examples_{0};
  std::atomic<uint64_t> keys_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> unavailable_{0};

  mutable absl::Mutex latency_mu_;
  LatencyHistogram latency_ ABSL_GUARDED_BY(latency_mu_);

  // The reload thread.
  absl::Notification stop_;
  std::thread reloader_;
  // Set before the thread starts.
  std::function<void()> on_load_;
  std::function<void()> on_tick_;
};

}  // namespace downpour::serve

#endif  // DOWNPOUR_SERVE_MODEL_SERVER_H_
