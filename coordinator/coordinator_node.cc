// Builds the coordinator's parts in dependency order and tears them down in
// reverse: threads first (they call into the state), then the server.
#include "coordinator/coordinator_node.h"

#include <algorithm>

#include "common/logging.h"
#include "coordinator/member_identity.h"
#include "proto/status.grpc.pb.h"
#include "rpc/health.h"

namespace downpour::coordinator {
namespace {

std::optional<ModelSpec> MaybeModel(const Config& config) {
  absl::StatusOr<ModelSpec> model = ModelSpec::Create(config.model);
  if (!model.ok()) return std::nullopt;
  return *std::move(model);
}

// Which member incarnation the daemon at `address` holds (its Status counter
// member_incarnation, 0 when it has none yet), asked with a short deadline;
// nullopt when nobody answers there.
std::optional<uint64_t> Probe(const std::string& address) {
  auto stub = proto::Status::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(0.5));
  proto::GetStatusResponse response;
  if (!stub->GetStatus(&context, proto::GetStatusRequest(), &response).ok()) {
    return std::nullopt;
  }
  auto it = response.counters().find(kMemberIncarnationCounter);
  return it == response.counters().end() ? 0
                                         : static_cast<uint64_t>(it->second);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorNode>> CoordinatorNode::Start(
    Options options) {
  if (options.listen.empty())
    options.listen = options.config.cluster.coordinator;
  absl::StatusOr<std::unique_ptr<ClusterState>> state =
      ClusterState::Create({options.config, options.clock, Probe});
  if (!state.ok()) return state.status();
  std::unique_ptr<CoordinatorNode> node(
      new CoordinatorNode(std::move(options), *std::move(state)));
  absl::StatusOr<StartedServer> server = StartServer(
      node->options_.listen, {&node->service_, &node->status_}, "coordinator");
  if (!server.ok()) return server.status();
  node->server_ = *std::move(server);
  SetReady(node->server_.server.get(), true);  // names kLivenessService too
  node->status_.set_address(node->server_.address);
  const Config& config = node->options_.config;
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> metrics = StartMetrics(
      config, node->options_.listen, node->server_.address, &node->status_);
  if (!metrics.ok()) return metrics.status();
  node->metrics_ = *std::move(metrics);
  SPDLOG_LOGGER_INFO(Log(Logger::kCoordinator),
                     "serving on {} ({} ps, {} workers expected)",
                     node->server_.address, config.cluster.ps.size(),
                     config.cluster.workers.size());
  node->liveness_ = std::thread([n = node.get()] { n->LivenessLoop(); });
  // Monitoring: the bounded history behind `psctl plot` and `psctl watch`.
  node->sampler_ = std::make_unique<HistorySampler>(
      &node->history_, [n = node.get()] { return n->state_->Status(); },
      absl::Seconds(config.coordinator.history_interval_s));
  return node;
}

CoordinatorNode::CoordinatorNode(Options options,
                                 std::unique_ptr<ClusterState> state)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      state_(std::move(state)),
      model_(MaybeModel(options_.config)),
      history_({options_.config.coordinator.history_size,
                options_.config.coordinator.history_interval_s}),
      service_(state_.get(), &history_,
               model_.has_value() ? &*model_ : nullptr),
      status_("coordinator", 0, &counters_) {}

CoordinatorNode::~CoordinatorNode() { Stop().IgnoreError(); }

void CoordinatorNode::LivenessLoop() {
  const absl::Duration period =
      absl::Seconds(options_.config.heartbeat.interval_s / 2);
  // A wake-up this much later than planned means the coordinator itself
  // stalled: the silence it would judge is its own.
  const absl::Duration stall =
      std::max(period, absl::Seconds(options_.config.heartbeat.timeout_s / 2));
  // Hearing nobody this long (two or more live members), the coordinator
  // takes the silence for its own network's: members heartbeat every
  // interval_s, so it is far shorter than the timeout minus one interval
  // (the most their last beats before a cut can be apart) and far longer
  // than a beat's gap.
  const absl::Duration isolation =
      std::max(absl::Seconds(2 * options_.config.heartbeat.interval_s),
               absl::Seconds(options_.config.heartbeat.timeout_s / 2));
  const absl::Duration timeout =
      absl::Seconds(options_.config.heartbeat.timeout_s);
  absl::Time last = clock_->Now();
  absl::Time isolated_since = absl::InfiniteFuture();
  absl::Time judge_from = absl::InfinitePast();
  while (!clock_->WaitForNotificationWithTimeout(&stopping_, period)) {
    CoordinatorService::FlushRefusalLog();
    const absl::Time now = clock_->Now();
    const absl::Duration late = now - last - period;
    last = now;
    if (late > stall) {
      state_->GiveGrace(late);
      continue;
    }
    if (state_->HearsNobody(isolation)) {
      // Declaring them all dead would hand every shard to a standby it
      // cannot reach either, from a checkpoint, while the shards' servers
      // go on serving the workers: acknowledged pushes lost for nothing.
      if (isolated_since == absl::InfiniteFuture()) {
        isolated_since = now - isolation;
        SPDLOG_LOGGER_WARN(
            Log(Logger::kCoordinator),
            "the coordinator has heard no member for {:.1f} s: its own "
            "network is likely cut off (every member dead at once is far "
            "less likely); it declares nobody dead until it hears one again",
            absl::ToDoubleSeconds(isolation));
        counters_.stats().isolations.Increment(1);
      }
      state_->HoldJudgement();
      continue;
    }
    if (isolated_since != absl::InfiniteFuture()) {
      // The others lost the coordinator at the same time as the first one
      // heard again, but their connections come back on TCP's
      // retransmission backoff, which after a silence of S retries about S
      // later: so they get that long (at most 10 timeouts) before the
      // clock runs again.
      const absl::Duration silence = now - isolated_since;
      judge_from = now + std::min(silence, 10 * timeout);
      SPDLOG_LOGGER_WARN(
          Log(Logger::kCoordinator),
          "the coordinator hears members again after {:.1f} s of silence; "
          "the others have {:.1f} s to be heard (their connections come "
          "back on TCP's backoff) before the {:.1f} s timeout runs again",
          absl::ToDoubleSeconds(silence),
          absl::ToDoubleSeconds(judge_from - now),
          options_.config.heartbeat.timeout_s);
      isolated_since = absl::InfiniteFuture();
    }
    if (now < judge_from) {
      state_->HoldJudgement();
      continue;
    }
    state_->CheckLiveness();
  }
}

void CoordinatorNode::Wait() { stopping_.WaitForNotification(); }

absl::Status CoordinatorNode::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  SetShuttingDown(server_.server.get());
  if (!stopping_.HasBeenNotified()) stopping_.Notify();
  if (liveness_.joinable()) liveness_.join();
  sampler_.reset();
  if (server_.server != nullptr) server_.server->Shutdown(DeadlineIn(2));
  // After the last heartbeat: the positions the workers sent as they
  // stopped are what a --resume goes on from.
  state_->SaveNow();
  return absl::OkStatus();
}

}  // namespace downpour::coordinator
