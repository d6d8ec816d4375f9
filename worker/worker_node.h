// One Downpour worker as a handle: loads the model, the compute backend and the
// data, serves its Status endpoint, registers with the coordinator, trains on
// its data parts against the ps shards and heartbeats until training ends.
// main.cc only parses flags, starts a node and waits.
//
//   WorkerNode::Options options;
//   options.config = config;
//   options.index = 0;
//   auto node = WorkerNode::Start(std::move(options));
//   if (!node.ok()) ...;  // IsSetupError(node.status()): bad input, exit 2
//   (*node)->Wait();
//   absl::Status trained = (*node)->Stop();
#ifndef DOWNPOUR_WORKER_WORKER_NODE_H_
#define DOWNPOUR_WORKER_WORKER_NODE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "membership/coordinator_client.h"
#include "membership/member_agent.h"
#include "rpc/metrics_http.h"
#include "rpc/server_util.h"
#include "rpc/status_service.h"
#include "worker/compute_backend.h"
#include "worker/data_parts.h"
#include "worker/dataset.h"
#include "worker/downpour.h"
#include "worker/grpc_ps_client.h"
#include "worker/sparse_data.h"
#include "worker/sparse_loop.h"
#include "worker/sparse_stream.h"
#include "worker/training_loop.h"

namespace downpour::worker {

// True when a WorkerNode::Start error comes from the user's input (the model
// spec, the compute backend, the data or their mismatch): ps_worker exits with
// status 2 for those and 1 for the rest (listen, registration, placement).
bool IsSetupError(const absl::Status& status);
// True for the Start error of a worker whose slot was drained (psctl
// drain-worker): ps_worker exits 0 with it.
bool IsDrained(const absl::Status& status);

// Thread-safe, except that Stop() and the destructor must not run at once.
class WorkerNode {
 public:
  struct Options {
    // The whole config, --set and flag overrides applied (data.path,
    // compute.device, compute.gpu).
    Config config;
    // This worker's index: in cluster.workers, or a slot of
    // cluster.max_workers beyond them (a worker that joined and restarts).
    int index = 0;
    // ps_worker --join: a worker not in the config joins the running job;
    // `index` is ignored, the coordinator gives it a free slot and data parts
    // (needs `listen`).
    bool join = false;
    // host:port to serve the Status endpoint on; "" = cluster.workers[index].
    // Port 0 = any free port (see port()).
    std::string listen;
    // --advertise: the address registered with the coordinator; "" = the bound
    // address (see AdvertisedAddress in rpc/daemon.h).
    std::string advertise;
    // Times the progress lines (every 5 s) and the ps client's backoff;
    // nullptr = Clock::Real(). For tests.
    Clock* clock = nullptr;
  };

  // Loads the model spec, backend and data (errors marked IsSetupError, with
  // the messages ps_worker prints), binds options.listen, registers and waits
  // for the placement (bounded by rpc.connect_timeout_s), then starts training,
  // heartbeats and progress lines.
  static absl::StatusOr<std::unique_ptr<WorkerNode>> Start(Options options);

  WorkerNode(const WorkerNode&) = delete;
  WorkerNode& operator=(const WorkerNode&) = delete;
  ~WorkerNode();  // Stop()s if not stopped

  int port() const { return server_.port; }
  std::string address() const { return server_.address; }
  // The coordinator drained it (psctl drain-worker): its parts went to the
  // others, so a push it could not finish loses nothing (not acknowledged,
  // its examples are read again from the part's saved position).
  bool drained() const { return drained_.load(); }

  // Notified when training has ended: the configured steps are done, the
  // coordinator said stop, a step failed, or Stop() was called.
  absl::Notification* ended() { return &ended_; }
  // Blocks until ended() is notified or Stop() has returned.
  void Wait() ABSL_LOCKS_EXCLUDED(mu_);

  // Asks the loop to stop (it pushes what it owes first), waits for it, sends
  // the final heartbeat (so the coordinator sees the final figures) and shuts
  // the server down. Returns the training result: OK, or the first error of
  // the compute, pull or push path. Idempotent: later calls return the same.
  absl::Status Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The loop's figures so far (all zero before training starts).
  WorkerStats stats() const;

 private:
  explicit WorkerNode(Options options);

  // Start's steps: everything Start does, leaving the node stoppable on error.
  absl::Status Load();
  absl::Status Serve();
  absl::Status JoinCluster();
  void StartThreads();

  // Registers again after a coordinator restart and applies the partition the
  // coordinator answers with.
  absl::Status Reregister();
  // Builds the sparse loop over this worker's parts (streamed or in memory).
  absl::Status MakeSparseLoop(const proto::Partition& partition);
  // The sparse loop's options from the config (training, shards, admission
  // counts, wide_deep's backend, the simulated device's step).
  SparseLoop::Options SparseOptions() const;
  // Trains on the parts in `partition` from the next step on, if they changed.
  void ApplyPartition(const proto::Partition& partition);
  // Registers (joining, with --join), learns the index and checks the parts.
  absl::StatusOr<proto::RegisterWorkerResponse> RegisterFirst();
  void OnHeartbeat(const proto::HeartbeatResponse& response);
  // The coordinator drained it (a heartbeat reply, or a registration after
  // its restart): once, it ends its step, pushes what it owes and stops.
  void LeaveDrained();
  proto::MemberReport Report() const;
  void FillStatus(proto::GetStatusResponse* response) const;
  void LogProgress();

  // Constant after Start (a worker that joins learns its index in it).
  Options options_;
  std::string who_;  // "worker N"
  Clock* const clock_;
  Counters counters_;
  std::unique_ptr<ModelSpec> spec_;
  std::unique_ptr<ComputeBackend> backend_;
  DataSplit data_;
  std::unique_ptr<DataParts> parts_;
  std::unique_ptr<StatusService> status_;
  StartedServer server_;
  std::unique_ptr<MetricsHttpServer> metrics_;  // null: metrics off
  std::string advertised_;
  std::unique_ptr<membership::CoordinatorClient> client_;
  // Seconds a shard has answered every push as a duplicate (0: none now).
  double DuplicateStreakSeconds() const;

  std::unique_ptr<GrpcPsClient> ps_;
  std::unique_ptr<TrainingLoop> loop_;
  // loop_ when the model is dense (it takes new data parts), else null.
  DownpourLoop* dense_loop_ = nullptr;
  // Sparse models (model.type sparse_linear): their data, and this worker's
  // part of the training rows.
  bool sparse_ = false;
  SparseSplit sparse_data_;
  std::shared_ptr<const data::SparseDataset> sparse_train_;
  // Streamed data (data.stream, criteo): the files, parser and test set,
  // and the batches the loop draws (owned by loop_; null otherwise).
  std::optional<StreamSource> stream_source_;
  StreamingBatches* stream_ = nullptr;
  // What computes: backend_->device(), or "cpu" for a sparse model.
  std::string device_;
  std::unique_ptr<membership::MemberAgent> agent_;
  std::thread trainer_;
  std::thread progress_;

  // The loop once built, for the Status endpoint, which serves before it is.
  std::atomic<const TrainingLoop*> running_loop_{nullptr};
  // The ps client once connected, for the same reason (waiting_for).
  std::atomic<const GrpcPsClient*> connected_ps_{nullptr};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> drained_{false};
  absl::Notification ended_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // stopped_ or trained_ became true
  bool trained_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_WORKER_NODE_H_
