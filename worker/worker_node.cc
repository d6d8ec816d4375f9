// The worker daemon's life: load, serve, join the cluster, train, stop.
#include "worker/worker_node.h"

#include <cblas.h>

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/member_identity.h"
#include "model/metrics.h"
#include "rpc/daemon.h"
#include "rpc/health.h"
#include "worker/backend_factory.h"
#include "worker/stream_positions.h"

namespace downpour::worker {
namespace {

// Marks a Start error as the user's input (see IsSetupError).
constexpr char kSetupErrorPayload[] = "type.downpour/worker.SetupError";

// A run of duplicate acknowledgements this long is reported: a retry or two
// of an applied push takes well under a second.
constexpr absl::Duration kDuplicateStreakWarning = absl::Seconds(3);

// Marks a Start error as "this worker's slot was drained" (see IsDrained).
constexpr char kDrainedPayload[] = "type.downpour/worker.Drained";

absl::Status SetupError(absl::Status status) {
  status.SetPayload(kSetupErrorPayload, absl::Cord("setup"));
  return status;
}

std::vector<int> Parts(const proto::Partition& partition) {
  return {partition.parts().begin(), partition.parts().end()};
}

}  // namespace

bool IsSetupError(const absl::Status& status) {
  return status.GetPayload(kSetupErrorPayload).has_value();
}

bool IsDrained(const absl::Status& status) {
  return status.GetPayload(kDrainedPayload).has_value();
}

namespace {

// SetupError unless this worker has the code to compute the model.
absl::Status CheckComputable(const ModelSection& model) {
  if (model.type != ModelType::kTensors) return absl::OkStatus();
  return SetupError(absl::InvalidArgumentError(
      "model.type tensors is computed by the workers that declare it "
      "(Python: downpour.torch.DenseOnPs, docs/PYTHON.md); ps_worker has no "
      "code for it: run those workers (launcher.worker_command)"));
}

}  // namespace

WorkerNode::WorkerNode(Options options)
    : options_(std::move(options)),
      who_(options_.join ? std::string("worker (joining)")
                         : absl::StrCat("worker ", options_.index)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()) {}

absl::StatusOr<std::unique_ptr<WorkerNode>> WorkerNode::Start(Options options) {
  std::unique_ptr<WorkerNode> node(new WorkerNode(std::move(options)));
  RETURN_IF_ERROR(node->Load());
  RETURN_IF_ERROR(node->Serve());
  RETURN_IF_ERROR(node->JoinCluster());
  node->StartThreads();
  return node;
}

WorkerNode::~WorkerNode() { Stop().IgnoreError(); }

absl::Status WorkerNode::Load() {
  const Config& config = options_.config;
  // Steps are single-threaded; the loop's own threads do the overlapping.
  openblas_set_num_threads(1);
  RETURN_IF_ERROR(CheckComputable(config.model));
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  if (!spec.ok()) return SetupError(spec.status());
  spec_ = std::make_unique<ModelSpec>(*std::move(spec));
  if (!spec_->sparse_tables().empty()) {
    // A sparse model's data are hashed keys, not dense rows. sparse_linear
    // and fm compute on the CPU (a dot product per example); wide_deep's MLP
    // runs on the compute backend (cpu or cuda, as config.compute says).
    sparse_ = true;
    device_ = "cpu";
    if (config.compute.device == ComputeDevice::kSimulated) {
      // sparse_linear and fm: real gradients, each step's compute padded
      // to compute.simulated_step_ms (the scale model's slower machine).
      device_ = absl::StrCat("simulated (", config.compute.simulated_step_ms,
                             " ms per step, real gradients on the CPU)");
    }
    if (config.model.type == ModelType::kWideDeep) {
      if (config.compute.device == ComputeDevice::kSimulated) {
        return SetupError(absl::InvalidArgumentError(
            "model.type wide_deep computes real gradients: compute.device "
            "simulated cannot train it; use auto, cpu or cuda"));
      }
      absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
          MakeBackend(config.compute, *spec_, config.training.batch_size);
      if (!backend.ok()) return SetupError(backend.status());
      backend_ = *std::move(backend);
      device_ = backend_->device();
    }
    if (StreamsData(config.data)) {
      absl::StatusOr<StreamSource> source =
          OpenStreamSource(config.data, spec_->task());
      if (!source.ok()) return SetupError(source.status());
      stream_source_ = *std::move(source);
      return absl::OkStatus();
    }
    absl::StatusOr<SparseSplit> data =
        LoadSparseData(config.data, config.training.seed, spec_->task());
    if (!data.ok()) return SetupError(data.status());
    sparse_data_ = *std::move(data);
    return absl::OkStatus();
  }
  // cpu, cuda or auto (config.compute); a cuda worker without a usable GPU
  // stops here, saying why.
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      MakeBackend(config.compute, *spec_, config.training.batch_size);
  if (!backend.ok()) return SetupError(backend.status());
  backend_ = *std::move(backend);
  device_ = backend_->device();
  absl::StatusOr<DataSplit> data =
      LoadData(config.data, config.training.seed, spec_->task());
  if (!data.ok()) return SetupError(data.status());
  data_ = *std::move(data);
  absl::Status fits = CheckDataFitsModel(data_, *spec_);
  return fits.ok() ? fits : SetupError(fits);
}

absl::Status WorkerNode::Serve() {
  status_ = std::make_unique<StatusService>(
      "worker", options_.index, &counters_,
      [this](proto::GetStatusResponse* r) { FillStatus(r); });
  const std::vector<std::string>& listed = options_.config.cluster.workers;
  if (options_.listen.empty() &&
      (options_.join || options_.index >= static_cast<int>(listed.size()))) {
    return SetupError(absl::InvalidArgumentError(absl::StrCat(
        options_.join ? std::string("--join")
                      : absl::StrCat("worker ", options_.index,
                                     " is a slot of cluster.max_workers, not "
                                     "in cluster.workers: it"),
        " needs --listen HOST:PORT (its Status endpoint; port 0 = any)")));
  }
  const std::string listen =
      options_.listen.empty() ? listed[options_.index] : options_.listen;
  ASSIGN_OR_RETURN(server_, StartServer(listen, {status_.get()}, who_));
  // Ready once registered and connected to its shards (JoinCluster).
  SetReady(server_.server.get(), false);
  status_->set_address(server_.address);
  ASSIGN_OR_RETURN(metrics_, StartMetrics(options_.config, listen,
                                          server_.address, status_.get()));
  advertised_ = AdvertisedAddress(server_.address, options_.advertise);
  return absl::OkStatus();
}

absl::Status WorkerNode::JoinCluster() {
  const Config& config = options_.config;
  client_ = std::make_unique<membership::CoordinatorClient>(
      config.cluster.coordinator, config.rpc, who_);
  ASSIGN_OR_RETURN(proto::RegisterWorkerResponse registered, RegisterFirst());
  const proto::Partition& partition = registered.partition();
  if (!sparse_) {
    parts_ = std::make_unique<DataParts>(&data_.train, Parts(partition),
                                         partition.num_parts());
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                       "partition {}/{}: {} training examples on {}",
                       partition.part(), partition.num_parts(),
                       parts_->train()->size(), device_);
  }

  ps_ = std::make_unique<GrpcPsClient>(
      *spec_, client_.get(), config.rpc, options_.index, &counters_,
      [this] { return stop_requested_.load(); }, clock_,
      OutageTimeout(config.training.outage_timeout_s),
      config.training.max_pushes_in_flight);
  RETURN_IF_ERROR(ps_->Connect());
  connected_ps_.store(ps_.get());
  SetReady(server_.server.get(), true);
  ps_->set_start_clock(registered.start_clock());
  ps_->set_incarnation(registered.incarnation(), registered.push_key());
  // Shown in Status: the coordinator asks it to tell whether this process
  // still is the worker it registered (coordinator/member_identity.h).
  counters_.stats().member_incarnation.Set(
      static_cast<double>(registered.incarnation()));

  if (sparse_) return MakeSparseLoop(partition);
  DownpourLoop::Options loop_options;
  loop_options.training = config.training;
  loop_options.optimizer = config.optimizer;
  loop_options.num_workers = static_cast<int>(config.cluster.workers.size());
  loop_options.worker_index = options_.index;
  loop_options.warmstart_patience = absl::Seconds(config.rpc.connect_timeout_s);
  // The loop shares the training set: parts_ lets go of it the moment a new
  // partition arrives, while the loop may still be in a step on it (it takes
  // the new set up at its next step). Borrowed, it was freed under that step.
  auto dense = std::make_unique<DownpourLoop>(*spec_, backend_.get(), ps_.get(),
                                              parts_->train(), &data_.test,
                                              loop_options);
  dense_loop_ = dense.get();
  loop_ = std::move(dense);
  running_loop_.store(loop_.get());
  return absl::OkStatus();
}

SparseLoop::Options WorkerNode::SparseOptions() const {
  const Config& config = options_.config;
  SparseLoop::Options sparse_options;
  sparse_options.training = config.training;
  sparse_options.worker_index = options_.index;
  sparse_options.num_shards = static_cast<int>(config.cluster.ps.size());
  // Occurrence counts for the ps's admission (admission.*, fm's
  // embedding_min_count).
  sparse_options.send_counts =
      config.admission.min_count > 1 || config.admission.probability < 1;
  for (const SparseTableSpec& table : spec_->sparse_tables()) {
    if (table.min_count > 1) sparse_options.send_counts = true;
  }
  sparse_options.backend = backend_.get();  // wide_deep only
  sparse_options.mean_pooling =
      config.model.wide_deep.pooling == Pooling::kMean;
  sparse_options.fm_scale_step =
      config.model.type == ModelType::kFm && config.model.fm.scale_step;
  if (config.compute.device == ComputeDevice::kSimulated) {
    sparse_options.simulated_compute =
        absl::Milliseconds(config.compute.simulated_step_ms);
  }
  return sparse_options;
}

absl::Status WorkerNode::MakeSparseLoop(const proto::Partition& partition) {
  const Config& config = options_.config;
  const SparseLoop::Options sparse_options = SparseOptions();
  if (!stream_source_.has_value()) {
    sparse_train_ = std::make_shared<const data::SparseDataset>(PartitionRows(
        sparse_data_.train, Parts(partition), partition.num_parts()));
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                       "partition {}/{}: {} training examples ({} keys) on {}",
                       partition.part(), partition.num_parts(),
                       sparse_train_->rows(), sparse_train_->entries(),
                       device_);
    loop_ = std::make_unique<SparseLoop>(*spec_, ps_.get(), sparse_train_,
                                         &sparse_data_.test, sparse_options);
    running_loop_.store(loop_.get());
    return absl::OkStatus();
  }
  StreamOptions stream;
  stream.files = stream_source_->train_files;
  stream.plan = data::PlanParts(stream.files, partition.num_parts());
  stream.parse = stream_source_->parse;
  stream.epochs = config.training.steps > 0 ? 0 : config.training.epochs;
  stream.shuffle_window = static_cast<size_t>(config.data.shuffle_window);
  stream.seed =
      config.training.seed + 7919 * static_cast<uint64_t>(options_.index);
  auto batches = std::make_unique<StreamingBatches>(std::move(stream));
  // A saved position the files do not have: the user's input (exit 2).
  absl::Status parts = batches->SetParts(ProgressOf(partition));
  if (!parts.ok()) return SetupError(parts);
  stream_ = batches.get();
  SPDLOG_LOGGER_INFO(
      Log(Logger::kWorker),
      "partition {}/{}: streaming parts [{}] of {} file(s), "
      "{} bytes an epoch, on {}",
      partition.part(), partition.num_parts(),
      absl::StrJoin(stream_->parts(), ", "), stream_source_->train_files.size(),
      stream_->bytes_total() / std::max(1, config.training.epochs), device_);
  loop_ =
      std::make_unique<SparseLoop>(*spec_, ps_.get(), std::move(batches),
                                   stream_source_->test.get(), sparse_options);
  running_loop_.store(loop_.get());
  return absl::OkStatus();
}

void WorkerNode::StartThreads() {
  agent_ = std::make_unique<membership::MemberAgent>(
      client_.get(), "worker", options_.index, advertised_,
      options_.config.heartbeat.interval_s, [this] { return Reregister(); },
      [this] { return Report(); },
      [this](const proto::HeartbeatResponse& response) {
        OnHeartbeat(response);
      });
  agent_->Start();
  trainer_ = std::thread([this] {
    absl::Status result = loop_->Run();
    // Bad data in the stream (a bad line, a missing or corrupt file): the
    // user's input, as when it is found at start (exit 2, not restarted).
    if (!result.ok() && stream_ != nullptr && stream_->failed()) {
      result = SetupError(std::move(result));
    }
    absl::MutexLock lock(&mu_);
    result_ = std::move(result);
    ended_.Notify();  // before Wait() can return
    trained_ = true;
    changed_.SignalAll();
  });
  progress_ = std::thread([this] { LogProgress(); });
}

absl::StatusOr<proto::RegisterWorkerResponse> WorkerNode::RegisterFirst() {
  if (options_.join && sparse_ && !stream_source_.has_value()) {
    // Its donors would keep reading the parts it took (docs/DATA.md).
    return SetupError(absl::FailedPreconditionError(
        "--join: sparse workers that hold their data in memory keep the part "
        "they started with, so a joining worker would train on data another "
        "worker still reads; stream the data (data.stream: true) to let "
        "workers join"));
  }
  ASSIGN_OR_RETURN(
      proto::RegisterWorkerResponse registered,
      client_->RegisterWorker(options_.index, advertised_, options_.join));
  if (registered.drained()) {
    absl::Status drained = absl::CancelledError(absl::StrCat(
        "worker ", registered.index(),
        " was drained (psctl drain-worker): its data parts went to the other "
        "workers, so it does not train again; start a worker with --join to "
        "add one"));
    drained.SetPayload(kDrainedPayload, absl::Cord("drained"));
    return drained;
  }
  if (!options_.join) return registered;
  // From here on it is worker N, and registers again as such.
  options_.index = registered.index();
  options_.join = false;
  who_ = absl::StrCat("worker ", options_.index);
  status_->set_index(options_.index);
  SetLogPrefix(who_);  // its lines named no index until now
  SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                     "joined the job as worker {}: data parts [{}] of {}",
                     options_.index,
                     absl::StrJoin(registered.partition().parts(), ", "),
                     registered.partition().num_parts());
  if (registered.partition().parts().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "joined as worker ", options_.index,
        " but the coordinator had no data part to hand it (every training "
        "worker holds one part, or they finished): raise cluster.max_workers "
        "for more parts, or stop this worker"));
  }
  return registered;
}

absl::Status WorkerNode::Reregister() {
  ASSIGN_OR_RETURN(proto::RegisterWorkerResponse registered,
                   client_->RegisterWorker(options_.index, advertised_));
  if (registered.drained()) {
    LeaveDrained();
    return absl::OkStatus();
  }
  counters_.stats().member_incarnation.Set(
      static_cast<double>(registered.incarnation()));
  // The restarted coordinator may have handed out parts anew: train on what it
  // says, as for a heartbeat's partition.
  ApplyPartition(registered.partition());
  return absl::OkStatus();
}

void WorkerNode::ApplyPartition(const proto::Partition& partition) {
  if (stream_ != nullptr) {
    if (partition.num_parts() == 0) return;  // no partition in it
    const std::vector<int> was = stream_->parts();
    absl::Status set = stream_->SetParts(ProgressOf(partition));
    if (!set.ok()) {
      SPDLOG_LOGGER_WARN(Log(Logger::kWorker), "data parts [{}] not taken: {}",
                         absl::StrJoin(Parts(partition), ", "),
                         std::string(set.message()));
    } else if (stream_->parts() != was) {
      SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                         "data parts now [{}] (were [{}]), read on from "
                         "their last reported positions",
                         absl::StrJoin(stream_->parts(), ", "),
                         absl::StrJoin(was, ", "));
    }
    return;
  }
  if (sparse_) {
    // In-memory sparse workers keep the part they registered with: a dead
    // worker's part is adopted by streamed workers only (docs/DATA.md).
    return;
  }
  const std::vector<int> was = parts_->parts();
  const std::vector<int> now = Parts(partition);
  std::shared_ptr<const Dataset> train =
      parts_->Update(now, partition.num_parts());
  if (train == nullptr) return;
  SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "data parts now [{}] (were [{}])",
                     absl::StrJoin(now, ", "), absl::StrJoin(was, ", "));
  dense_loop_->ReplaceTrainingData(std::move(train));
}

void WorkerNode::LeaveDrained() {
  // Its parts went to the others: it reads none again (an empty partition
  // would mean its own part), ends its step and pushes what it owes. Not
  // stop_requested_: its pushes in flight are waited for (retried through a
  // take-over), so each one it had applied is one it counts.
  if (drained_.exchange(true)) return;
  SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                     "drained (psctl drain-worker): its data parts went to "
                     "the other workers; ending the step in flight, pushing "
                     "what is owed and exiting");
  loop_->Stop();
}

void WorkerNode::OnHeartbeat(const proto::HeartbeatResponse& response) {
  if (response.drained()) {
    LeaveDrained();
    return;
  }
  ApplyPartition(response.partition());
  if (response.stop() && !stop_requested_.exchange(true)) {
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "coordinator says stop: {}",
                       response.stop_reason());
    loop_->Stop();
  }
}

WorkerStats WorkerNode::stats() const {
  const TrainingLoop* loop = running_loop_.load();
  return loop != nullptr ? loop->stats() : WorkerStats();
}

proto::MemberReport WorkerNode::Report() const {
  const WorkerStats stats = this->stats();
  proto::MemberReport report;
  report.set_step(stats.step);
  report.set_examples(stats.examples);
  report.set_examples_per_sec(stats.examples_per_sec);
  report.set_loss(stats.loss);
  report.set_accuracy(stats.accuracy);
  report.set_evaluations(stats.evaluations);
  const GrpcPsClient* ps = connected_ps_.load();
  report.set_duplicate_push_streak_s(DuplicateStreakSeconds());
  for (const auto& [name, value] : stats.metrics) {
    (*report.mutable_metrics())[name] = value;
  }
  report.set_pulls(counters_.stats().pulls.Value());
  report.set_pushes(stats.pushes);  // whole pushes applied, not RPCs
  report.set_refused_steps(static_cast<uint64_t>(stats.refused_steps));
  report.set_sparse_row_updates(static_cast<uint64_t>(stats.row_updates));
  report.set_bytes(counters_.stats().bytes_in.Value() +
                   counters_.stats().bytes_out.Value());
  report.set_mean_staleness(stats.mean_staleness);
  report.set_staleness_p50(stats.staleness_p50);
  report.set_staleness_p99(stats.staleness_p99);
  report.set_staleness_max(stats.staleness_max);
  report.set_finished(stats.finished);
  report.set_planned_steps(stats.planned_steps);
  report.set_device(device_);
  report.set_diverged(stats.diverged);
  if (ps != nullptr) report.set_clock(ps->acked_clock());
  if (stream_ != nullptr) AddStreamReport(*stream_, stats, &report);
  return report;
}

void WorkerNode::FillStatus(proto::GetStatusResponse* r) const {
  const WorkerStats stats = this->stats();
  r->set_loss(stats.loss);
  r->set_accuracy(stats.accuracy);
  for (const auto& [name, value] : stats.metrics) {
    (*r->mutable_metrics())[name] = value;
  }
  r->set_examples_per_sec(stats.examples_per_sec);
  r->set_device(device_);
  (*r->mutable_counters())["step"] = stats.step;
  (*r->mutable_counters())["examples"] = stats.examples;
  (*r->mutable_counters())["mean_staleness"] = stats.mean_staleness;
  (*r->mutable_counters())["pushed_steps"] = stats.pushed_steps;
  (*r->mutable_counters())["refused_steps"] = stats.refused_steps;
  (*r->mutable_counters())["share_compute"] = stats.share_compute;
  (*r->mutable_counters())["share_wait_pull"] = stats.share_wait_pull;
  (*r->mutable_counters())["share_wait_push"] = stats.share_wait_push;
  // Streamed data: the share of wall time the loop waited for the reader.
  (*r->mutable_counters())["share_wait_data"] = stats.share_wait_data;
  (*r->mutable_counters())["test_loss"] = stats.test_loss;
  (*r->mutable_counters())["finished"] = stats.finished ? 1 : 0;
  const TrainingLoop* loop = running_loop_.load();
  if (loop != nullptr) FillStaleness(loop->staleness(), r);
  const GrpcPsClient* ps = connected_ps_.load();
  const std::optional<GrpcPsClient::Outage> outage =
      ps != nullptr ? ps->outage() : std::nullopt;
  (*r->mutable_counters())["waiting_for_ps"] =
      outage.has_value() ? outage->shard : -1;
  (*r->mutable_counters())["waiting_for_s"] =
      outage.has_value() ? absl::ToDoubleSeconds(outage->unreachable_for) : 0;
  if (outage.has_value()) r->set_waiting_for(DescribeOutage(*outage));
  (*r->mutable_counters())["duplicate_push_streak_s"] =
      DuplicateStreakSeconds();
}

double WorkerNode::DuplicateStreakSeconds() const {
  const GrpcPsClient* ps = connected_ps_.load();
  const std::optional<GrpcPsClient::DuplicateStreak> duplicates =
      ps != nullptr ? ps->duplicate_streak() : std::nullopt;
  return duplicates.has_value()
             ? absl::ToDoubleSeconds(duplicates->for_how_long)
             : 0.0;
}

void WorkerNode::LogProgress() {
  absl::Time last_advice = absl::InfinitePast();
  while (!clock_->WaitForNotificationWithTimeout(&ended_, absl::Seconds(5))) {
    const WorkerStats s = stats();
    const double network = s.share_wait_pull + s.share_wait_push;
    SPDLOG_LOGGER_INFO(
        Log(Logger::kWorker),
        "step {} | {:.0f} applied examples/s | loss {:.4f} | test {} | "
        "time: compute {:.0f}%, wait pull {:.0f}%, wait push {:.0f}%{}{}",
        s.step, s.examples_per_sec, s.loss, model::FormatMetrics(s.metrics),
        100 * s.share_compute, 100 * s.share_wait_pull, 100 * s.share_wait_push,
        stream_ != nullptr
            ? absl::StrFormat(", wait data %.1f%%", 100 * s.share_wait_data)
            : "",
        network > 0.5 ? " (network-bound)" : "");
    const absl::Time now = clock_->Now();
    const std::optional<GrpcPsClient::DuplicateStreak> duplicates =
        ps_ != nullptr ? ps_->duplicate_streak() : std::nullopt;
    if (duplicates.has_value() &&
        duplicates->for_how_long >= kDuplicateStreakWarning) {
      // Every 5 s, like the progress line: the figures above count steps
      // whose gradients this shard did not apply.
      SPDLOG_LOGGER_WARN(
          Log(Logger::kWorker),
          "{}: ps {} has answered all {} of this worker's pushes of the last "
          "{:.0f} s as duplicates, so none was applied: this is never "
          "normal. Another process may be pushing as this worker "
          "(docs/SECURITY.md), or the shard holds a state ahead of it; "
          "restart this worker if it persists",
          who_, duplicates->shard, duplicates->pushes,
          absl::ToDoubleSeconds(duplicates->for_how_long));
    }
    const std::optional<GrpcPsClient::Outage> outage =
        ps_ != nullptr ? ps_->outage() : std::nullopt;
    if (outage.has_value()) {
      // Every 5 s, like the progress line: training holds still meanwhile.
      SPDLOG_LOGGER_WARN(Log(Logger::kWorker),
                         "{}: training waits for {}: no step is computed "
                         "until it is reachable again",
                         who_, DescribeOutage(*outage));
      continue;  // the network advice below is not what helps now
    }
    if (network > 0.5 && now - last_advice >= absl::Seconds(30)) {
      last_advice = now;
      SPDLOG_LOGGER_WARN(
          Log(Logger::kWorker),
          "this worker spends {:.0f}% of its time waiting on the network "
          "(pulls {:.0f}%, pushes {:.0f}%); to push less often raise "
          "training.n_push, to pull less often raise training.n_fetch, to "
          "overlap pulls with compute set training.fetch: overlap (staler "
          "gradients), to pipeline pushes raise "
          "training.max_pushes_in_flight (with fetch overlap or n_fetch > 1), "
          "or spread the model over more ps shards",
          100 * network, 100 * s.share_wait_pull, 100 * s.share_wait_push);
    }
  }
}

void WorkerNode::Wait() {
  absl::MutexLock lock(&mu_);
  while (!trained_ && !stopped_) changed_.Wait(&mu_);
}

absl::Status WorkerNode::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return result_;
  }
  // NOT_SERVING while it flushes what it owes, before the server stops.
  SetShuttingDown(server_.server.get());
  // Retries in the ps client end too, so the flush does not wait on a dead ps
  // for the whole connect timeout.
  stop_requested_.store(true);
  if (loop_ != nullptr) loop_->Stop();  // pushes what it owes, then returns
  if (trainer_.joinable()) trainer_.join();
  if (progress_.joinable()) progress_.join();
  if (agent_ != nullptr) {  // the last heartbeat carries the final figures
    agent_->Stop(membership::MemberAgent::FinalBeatBudget(
        options_.config.rpc.connect_timeout_s));
  }
  if (server_.server != nullptr) server_.server->Shutdown(DeadlineIn(1));
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  changed_.SignalAll();
  return result_;
}

}  // namespace downpour::worker
