// Each handler: call the shard, convert the status, finish.
#include "server/ps_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log_throttle.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "rpc/grpc_status.h"
#include "rpc/security.h"
#include "rpc/wire_format.h"
#include "server/pull_reply.h"

namespace downpour::server {
namespace {

// One client can send refused requests as fast as the network allows: the
// first few of each kind per 10 s are logged in full, the rest counted.
LogThrottle& RefusalLog() {
  static LogThrottle* throttle = new LogThrottle(LogThrottle::Options());
  return *throttle;
}

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                 grpc::ServerUnaryReactor* reactor,
                                 const absl::Status& status, const char* op) {
  if (!status.ok() && !absl::IsUnavailable(status) &&
      !absl::IsFailedPrecondition(status)) {
    // Bad requests are the client's problem, but an operator wants to see them.
    RefusalLog().Log(Log(Logger::kRpc), spdlog::level::warn,
                     absl::StrCat("ps: ", op, " requests refused (",
                                  absl::StatusCodeToString(status.code()), ")"),
                     absl::StrCat(op, " from ", context->peer(),
                                  " rejected: ", status.message()));
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                 const absl::Status& status, const char* op) {
  return Finish(context, context->DefaultReactor(), status, op);
}

const absl::Status& NoShard() {
  static const absl::Status* status = new absl::Status(
      absl::UnavailableError("this ps serves no shard (a standby, or "
                             "replaced): re-read the placement"));
  return *status;
}

}  // namespace

void PsService::FlushRefusalLog() {
  for (const std::string& line : RefusalLog().Flush()) {
    SPDLOG_LOGGER_WARN(Log(Logger::kRpc), "{}", line);
  }
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  Shard* shard = shard_.load();
  if (shard == nullptr) return Finish(context, NoShard(), "pull");
  // A sparse pull's request carries its keys: bounded before it is parsed.
  absl::Status sized = shard->CheckReadSize("pull", request->Length());
  if (!sized.ok()) return Finish(context, sized, "pull");
  proto::PullRequest pull;
  grpc::ByteBuffer bytes(*request);  // shares the slices; parsing consumes it
  if (!grpc::SerializationTraits<proto::PullRequest>::Deserialize(&bytes, &pull)
           .ok()) {
    // A call whose client gave up before its message was read (a ps woken
    // from a stop finds such calls queued) has no request to parse: that is
    // not malformed input.
    if (context->IsCancelled()) {
      return Finish(context,
                    absl::CancelledError("pull: the client gave up on it (its "
                                         "deadline passed) before it was read"),
                    "pull");
    }
    return Finish(context, absl::InvalidArgumentError("malformed pull request"),
                  "pull");
  }
  absl::StatusOr<grpc::ByteBuffer> reply = BuildPullReply(*shard, pull);
  if (reply.ok()) response->Swap(&*reply);
  return Finish(context, reply.status(), "pull");
}

// One push in flight: the request's parsed view and the arena it may point
// into live until the call is answered.
struct PsService::PushCall {
  wire::PushView view;
  wire::Arena arena;
  proto::PushResponse response;
};

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  Shard* shard = shard_.load();
  if (shard == nullptr) return Finish(context, NoShard(), "push");
  auto call = std::make_shared<PushCall>();
  int64_t in_place = 0, copied = 0;
  absl::Status parsed =
      wire::ParsePush(*request, &call->arena, &call->view, &in_place, &copied);
  if (!parsed.ok()) return Finish(context, parsed, "push");
  if (TransportIsMutual()) {
    // With mutual TLS a worker pushes only as itself: its certificate names
    // the worker id its pushes carry.
    absl::Status member =
        CheckCallerIsMember(context->auth_context().get(),
                            {absl::StrCat("worker-", call->view.worker_id)},
                            absl::StrCat("push: a push as worker ",
                                         call->view.worker_id, " is made"));
    if (!member.ok()) return Finish(context, member, "push");
  }
  bytes_in_place_ += in_place;
  bytes_copied_ += copied;
  auto answer = [call, response, shard](const absl::Status& status) {
    if (!status.ok()) return status;
    if (call->view.reply_values) {
      // The pull that follows the push, in the same round trip.
      absl::StatusOr<grpc::ByteBuffer> reply =
          BuildPushReplyWithValues(*shard, call->view, call->response);
      if (!reply.ok()) return reply.status();
      response->Swap(&*reply);
      return status;
    }
    bool own_buffer = false;
    (void)grpc::SerializationTraits<proto::PushResponse>::Serialize(
        call->response, response, &own_buffer);
    return status;
  };
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!shard->may_hold_pushes()) {
    Answer(context, reactor, shard->Push(call->view, &call->response), answer);
    return reactor;
  }
  // A held push gives up shortly before the caller's deadline.
  const absl::Time deadline = absl::FromChrono(context->deadline());
  auto push = [=](absl::Time until) {
    Answer(context, reactor, shard->Push(call->view, &call->response, until),
           answer);
  };
  if (!TryRunOnPushThread([=] { push(deadline); })) {
    // Every push thread holds a push: this one is not held (see the class
    // comment). With a deadline already past the shard waits for nothing.
    ++not_held_;
    push(absl::InfinitePast());
  }
  return reactor;
}

void PsService::Answer(
    grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
    absl::Status status,
    std::function<absl::Status(const absl::Status&)> answer) {
  Replicator* replicator = replicator_.load();
  if (!status.ok() || replicator == nullptr) {
    Finish(context, reactor, answer(status), "push");
    return;
  }
  // Applied (or a duplicate of an applied push, which may not be replicated
  // yet either): acknowledged once the backup has it.
  replicator->WhenReplicated(
      [context, reactor, answer = std::move(answer)](const absl::Status& s) {
        Finish(context, reactor, answer(s), "push");
      });
}

grpc::ServerUnaryReactor* PsService::Replicate(
    grpc::CallbackServerContext* context,
    const proto::ReplicateRequest* request,
    proto::ReplicateResponse* response) {
  if (TransportIsMutual()) {
    // Only a ps or a standby streams a shard (a worker token or certificate
    // never does).
    absl::Status member = CheckCallerIsMember(
        context->auth_context().get(), {"ps-*", "standby-*"},
        "replicate: a shard is streamed to its backup");
    if (!member.ok()) return Finish(context, member, "replicate");
  }
  Replica* replica = replica_.load();
  Shard* shard = shard_.load();
  if (shard != nullptr && shard->index() == request->shard_index()) {
    // Fencing: the primary that streams here was replaced by this daemon.
    return Finish(context,
                  absl::AbortedError(absl::StrCat(
                      "replicate: this daemon serves shard ", shard->index(),
                      " itself now; the primary at ", request->primary(),
                      " was replaced and must stop")),
                  "replicate");
  }
  if (replica == nullptr || shard != nullptr) {
    return Finish(
        context,
        absl::FailedPreconditionError(absl::StrCat(
            "replicate: this daemon backs up no shard (",
            shard != nullptr ? absl::StrCat("it serves shard ", shard->index())
                             : std::string("not a standby"),
            "); wait for the coordinator to name another backup")),
        "replicate");
  }
  absl::StatusOr<uint64_t> held = replica->Apply(*request);
  if (held.ok()) response->set_generation(*held);
  return Finish(context, held.status(), "replicate");
}

PsService::~PsService() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

int PsService::PushThreadsFor(const Config& config) {
  const int64_t requests =
      int64_t{WorkerSlots(config.cluster)} * kPushRequestsPerShard;
  return static_cast<int>(std::clamp<int64_t>(requests, 1, kMaxPushThreads));
}

bool PsService::TryRunOnPushThread(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  // A thread per push held at once, up to the bound.
  if (idle_ <= static_cast<int>(tasks_.size())) {
    if (static_cast<int>(threads_.size()) >= max_push_threads_) return false;
    threads_.emplace_back([this] { PushThread(); });
    ++idle_;
  }
  tasks_.push_back(std::move(task));
  return true;
}

int PsService::push_threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

void PsService::PushThread() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PsService* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->stopping_ || !self->tasks_.empty();
          },
          this));
      if (tasks_.empty()) return;  // stopping
      task = std::move(tasks_.front());
      tasks_.pop_front();
      --idle_;
    }
    task();
    absl::MutexLock lock(&mu_);
    ++idle_;
  }
}

grpc::ServerUnaryReactor* PsService::Checksums(
    grpc::CallbackServerContext* context, const proto::ChecksumRequest*,
    proto::ChecksumResponse* response) {
  Shard* shard = shard_.load();
  if (shard != nullptr) *response = shard->Checksums();
  return Finish(context, shard ? absl::OkStatus() : NoShard(), "checksums");
}

grpc::ServerUnaryReactor* PsService::Lookup(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  Shard* shard = shard_.load();
  if (shard == nullptr) return Finish(context, NoShard(), "lookup");
  absl::Status sized = shard->CheckReadSize("lookup", request->Length());
  if (!sized.ok()) return Finish(context, sized, "lookup");
  proto::LookupRequest lookup;
  grpc::ByteBuffer bytes(*request);  // shares the slices; parsing consumes it
  if (!grpc::SerializationTraits<proto::LookupRequest>::Deserialize(&bytes,
                                                                    &lookup)
           .ok()) {
    return Finish(context,
                  absl::InvalidArgumentError("malformed lookup request"),
                  "lookup");
  }
  proto::LookupResponse reply;
  absl::Status found = shard->Lookup(lookup, &reply);
  if (found.ok()) {
    bool own_buffer = false;
    (void)grpc::SerializationTraits<proto::LookupResponse>::Serialize(
        reply, response, &own_buffer);
  }
  return Finish(context, found, "lookup");
}

grpc::ServerUnaryReactor* PsService::CopyBuckets(
    grpc::CallbackServerContext* context,
    const proto::CopyBucketsRequest* request,
    proto::CopyBucketsResponse* response) {
  Shard* shard = nullptr;
  absl::Status may = MayCopyMoved(context, "copy buckets", &shard);
  if (!may.ok()) return Finish(context, may, "copy buckets");
  return Finish(context, shard->CopyBuckets(*request, response),
                "copy buckets");
}

grpc::ServerUnaryReactor* PsService::CopyBlocks(
    grpc::CallbackServerContext* context,
    const proto::CopyBlocksRequest* request,
    proto::CopyBlocksResponse* response) {
  Shard* shard = nullptr;
  absl::Status may = MayCopyMoved(context, "copy blocks", &shard);
  if (!may.ok()) return Finish(context, may, "copy blocks");
  return Finish(context, shard->CopyBlocks(*request, response), "copy blocks");
}

absl::Status PsService::MayCopyMoved(grpc::CallbackServerContext* context,
                                     const char* what, Shard** shard) const {
  if (TransportIsMutual()) {
    // Only a ps (or a standby serving a shard) receives what moved.
    RETURN_IF_ERROR(CheckCallerIsMember(
        context->auth_context().get(), {"ps-*", "standby-*"},
        absl::StrCat(what, ": a ps copies what moved to it")));
  }
  *shard = shard_.load();
  if (*shard == nullptr) return NoShard();
  return absl::OkStatus();
}

}  // namespace downpour::server
