// The worker's PsClient over gRPC: pulls and pushes of the whole flat parameter
// vector, split into blocks and gathered across the ps shards by the
// coordinator's placement map.
//
//   GrpcPsClient client(spec, &coordinator, config.rpc, index, &counters);
//   RETURN_IF_ERROR(client.Connect());
//   RETURN_IF_ERROR(client.Pull(params.data(), &versions));
#ifndef DOWNPOUR_WORKER_GRPC_PS_CLIENT_H_
#define DOWNPOUR_WORKER_GRPC_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "common/push_view.h"
#include "common/wire_encoding.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/wire_format.h"
#include "worker/ps_client.h"
#include "worker/push_pipeline.h"
#include "worker/sparse_ps.h"

namespace downpour::worker {

struct PushRequestState;  // one request of a push (grpc_ps_client.cc)

// PsClient over gRPC. Thread-safe: Pulls and Pushes may run at once from any
// threads. No mutex is held while an RPC or a backoff sleep runs.
//
// Each shard's blocks are cut into requests of at most 4 MiB. A Pull or Push
// starts every request of every shard at once (gRPC's callback API: no thread
// per shard), a push within a window per shard (kPushRequestsPerShard requests
// in flight, common/config.h), then retries the ones that failed. Pushes begun
// by StartPush run on the client's PushPipeline (worker/push_pipeline.h), at
// most max_pushes_in_flight at once, Push included. Every request is retried on
// its own: a retryable failure (common/retry.h IsRetryable: UNAVAILABLE,
// DEADLINE_EXCEEDED, FAILED_PRECONDITION such as a stale placement epoch,
// ABORTED) makes the client re-read the placement (the shard may have moved or
// restarted) and try again with capped exponential backoff and jitter on
// `clock`, for up to `outage_timeout` per request (training.outage_timeout_s),
// logging what it waits for; outage() says which shard a call waits for
// now and for how long. A retry carries the same block ids as the first try,
// whatever the new placement's chunks, so it can never be applied to other
// blocks. Errors Pull and Push return:
//   DeadlineExceeded  "worker N: gave up waiting for <pull from|push to> ps I
//                     at ADDR after S s: <last error>; ...": retries ran out;
//                     the message names training.outage_timeout_s and how to
//                     bring the shard back.
//   Cancelled         "worker N: stopped while waiting for ...": `should_stop`
//                     returned true while retrying.
//   Internal          Pull only: a shard returned a block it does not hold in
//                     the spec, or one of the wrong size (the daemons disagree
//                     on the config).
//   OutOfRange        Push only: a newer incarnation of this worker has pushed
//                     to the shard (this process was replaced).
//   any other code    the shard's non-retryable answer, returned at once,
//                     e.g. InvalidArgument for a gradient with NaN.
// A failed Push may have been applied on some shards and for some requests.
//
// Bytes (rpc/wire_format.h): push payloads are sent from `grad` itself,
// not copied (Push returns once gRPC has let go of them); pull replies are
// copied once, from the received slices into `params`.
//
// Exactly once: each push request carries this worker's id and a per-shard
// sequence number, (incarnation << 32) | n, kept across its retries. The
// incarnation comes from the coordinator (set_incarnation), so a restarted
// worker numbers above its previous run without any clock. The ps remembers
// which sequences of a window it applied (server/sequence_window.h), so
// requests in flight together may arrive in any order. The client never has a
// request in flight kPushRequestsPerShard or more sequences past the oldest one
// not yet acknowledged on that shard, however many pushes are in flight.
//
// Live bucket moves: a ps answers a request whose keys include a bucket it
// handed to another ps with FAILED_PRECONDITION "bucket moved"
// (common/sparse_keys.h; nothing applied, the sequence not used up). The
// client re-reads the placement and splits the request by the buckets' new
// owners: a push's keys the ps still holds (and its dense blocks) go to it
// again under the same sequence, even with no keys left, so its sequences
// have no gap; each other owner's keys go as a request of their own with
// that shard's next sequence, retried like any request (a piece may be moved
// again: split again). A pull gathers the keys from their owners and
// returns them in the caller's order. The push counts as one push (one
// pushes_acked, one PushReport). When the placement still gives the ps the
// keys it calls moved after kMovedTries reads, the call fails with Internal
// (the coordinator and the ps disagree). Re-splits are logged at INFO, at
// most one line per 10 s.
class GrpcPsClient : public PsClient, public SparsePs {
 public:
  // Borrows spec, coordinator, counters and clock; they must outlive the
  // client. `should_stop` (optional) ends a retry wait early with Cancelled.
  // `clock` (nullptr = Clock::Real()) times backoff sleeps, the retry timeout
  // and the outage figure; tests pass a FakeClock. `outage_timeout`: how long
  // a Pull or Push retries an unreachable shard before it gives up
  // (absl::InfiniteDuration() = forever; see OutageTimeout).
  // `max_pushes_in_flight`: training.max_pushes_in_flight (PsClient).
  GrpcPsClient(const ModelSpec& spec,
               membership::CoordinatorClient* coordinator,
               const RpcSection& rpc, int worker_id, Counters* counters,
               std::function<bool()> should_stop = nullptr,
               Clock* clock = nullptr,
               absl::Duration outage_timeout = absl::Seconds(300),
               int max_pushes_in_flight = 1);
  ~GrpcPsClient() override;

  GrpcPsClient(const GrpcPsClient&) = delete;
  GrpcPsClient& operator=(const GrpcPsClient&) = delete;

  // Waits for the first placement (epoch >= 1) and connects to its shards.
  // Returns the coordinator client's errors: DeadlineExceeded after
  // rpc.connect_timeout_s, Cancelled when `should_stop` says so.
  // REQUIRES: called once, before Pull and Push.
  absl::Status Connect() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Pull(float* params, std::vector<uint64_t>* versions) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // A sparse model's push, waited for (outside the push pipeline: the
  // sparse loop pushes one step at a time): the dense blocks' gradient
  // `grad` at `versions` as Push, and rows[s], the sparse rows of ps s
  // (keys sorted and unique, of buckets ps s serves, common/sparse_keys.h),
  // all applied once under the same exactly-once sequences. The arrays are
  // read until it returns.
  absl::Status PushWithRows(
      const float* grad, const std::vector<uint64_t>& versions,
      const std::vector<std::vector<wire::SparseRef>>& rows,
      PushReport* report) override ABSL_LOCKS_EXCLUDED(mu_);
  // PushWithRows whose requests ask for every pushed block's values back
  // (PushRequest.reply_values), as PushPullBlocks does.
  absl::Status PushWithRowsAndPull(
      const float* grad, const std::vector<uint64_t>& versions,
      const std::vector<std::vector<wire::SparseRef>>& rows, PushReport* report,
      float* params, std::vector<uint64_t>* fresh) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // training.fetch layerwise: a Push of blocks `ids` only whose requests
  // ask for the blocks' values back (PushRequest.reply_values), with Push's
  // retries and errors, plus Pull's Internal for values that do not fit the
  // spec (PsClient).
  absl::Status PushPullBlocks(const float* grad,
                              const std::vector<uint64_t>& versions,
                              const std::vector<uint32_t>& ids,
                              PushReport* report, float* params,
                              std::vector<uint64_t>* fresh) override
      ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<const std::vector<int>> BucketOwners() const override
      ABSL_LOCKS_EXCLUDED(mu_);
  // The values of keys[s] (ps s's keys, sorted and unique) in each table
  // into (*values)[t][s], keys[s].size() * dim floats; one request per ps
  // for all tables, retried like Pull. A key without a row reads its initial
  // values (nothing is created).
  absl::Status PullTables(const std::vector<TableRows>& tables,
                          const std::vector<std::vector<uint64_t>>& keys,
                          std::vector<std::vector<std::vector<float>>>* values)
      override ABSL_LOCKS_EXCLUDED(mu_);

  // The placement epoch in use (0 before Connect).
  uint64_t epoch() const ABSL_LOCKS_EXCLUDED(mu_);

  // ssp clocks: each push carries start + the number of pushes sent so far
  // (the same in every shard request of one push), so all shards see one
  // clock per worker. `start` is RegisterWorkerResponse.start_clock; only the
  // first call before any Push counts.
  void set_start_clock(uint64_t start) ABSL_LOCKS_EXCLUDED(mu_);
  // The incarnation and push key the coordinator issued this worker process
  // (RegisterWorkerResponse.incarnation, .push_key); only the first call
  // before any Push counts. Without one, sequences start at incarnation 0 and
  // pushes carry no key (a ps without a coordinator).
  void set_incarnation(uint64_t incarnation, uint64_t push_key = 0)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The clock of the last Push acknowledged (start clock before any).
  uint64_t acked_clock() const ABSL_LOCKS_EXCLUDED(mu_);

  // A shard that a Pull or Push retries for now.
  struct Outage {
    int shard = -1;
    std::string address;
    absl::Duration unreachable_for;  // since the first failed try of the wait
    absl::Duration timeout;          // outage_timeout
  };
  // The shard unreachable longest now; nullopt when no call is retrying.
  std::optional<Outage> outage() const ABSL_LOCKS_EXCLUDED(mu_);

  // A shard that has answered every push of this worker as a duplicate
  // (applied before, so nothing was applied) since `since`: never normal for
  // more than a retry or two, as it means this worker's pushes are dropped
  // (another process pushed as this worker, or the shard holds a state ahead
  // of it).
  struct DuplicateStreak {
    int shard = -1;
    absl::Duration for_how_long;
    uint64_t pushes = 0;  // push requests answered as duplicates meanwhile
  };
  // The longest streak now; nullopt when every shard's last answer applied.
  std::optional<DuplicateStreak> duplicate_streak() const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct ShardLink;  // one ps as this client reaches it: address, stubs, blocks
                     // cut into chunks
  struct PushCall;   // one Push: its requests and their state

  // The calls of one shard retrying now (outage()).
  struct Waiting {
    int calls = 0;        // WithRetries calls past their first failure
    absl::Time since;     // the earliest first failure among them
    std::string address;  // the shard's address they last tried
  };

  // Window state of one shard index.
  struct PushLane {
    uint64_t next_sequence = 0;    // for the next request (0: not started)
    std::set<uint64_t> in_flight;  // sent, not yet acknowledged
    // Since when every acknowledgement was a duplicate, and how many.
    absl::Time duplicates_since = absl::InfiniteFuture();
    uint64_t duplicates = 0;
  };

  // Pull, again from the start (at most kMaxMoveHops times) when a ps
  // answers that blocks moved.
  absl::Status PullFollowingMoves(float* params,
                                  std::vector<uint64_t>* versions, int hops)
      ABSL_LOCKS_EXCLUDED(mu_);
  // PullFollowingMoves after ps answered `answer` ("bucket moved").
  absl::Status PullAfterMove(float* params, std::vector<uint64_t>* versions,
                             int hops, const absl::Status& answer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Re-reads the placement if it is newer than `seen_epoch`.
  absl::Status Refresh(uint64_t seen_epoch) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<const ShardLink> GetShardLink(int index,
                                                uint64_t* epoch) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<const ShardLink>> GetShardLinks(
      uint64_t* epoch) const ABSL_LOCKS_EXCLUDED(mu_);
  // Copies a pull reply's blocks into params and versions, checking their
  // ids and sizes.
  absl::Status CopyBlocks(int index, const grpc::ByteBuffer& reply,
                          float* params, std::vector<uint64_t>* versions);
  // One block of a reply from shard `index` into params and versions, with
  // CopyBlocks' checks; adds its payload bytes to *bytes.
  absl::Status CopyBlock(int index, const wire::BlockRef& block,
                         const wire::CopyPayload& copy, float* params,
                         std::vector<uint64_t>* versions, int64_t* bytes);
  // Where PushPullBlocks's values go.
  struct Values {
    float* params = nullptr;
    std::vector<uint64_t>* versions = nullptr;
  };
  // One push, waited for: what the pipeline's Send does.
  // `rows`: PushWithRows's sparse rows, or null. `only`: PushPullBlocks's
  // block ids, or null for every block. `values`: where the values the
  // shards answer with go, or null to ask for none.
  absl::Status SendPush(
      const float* grad, const std::vector<uint64_t>& versions,
      PushReport* report,
      const std::vector<std::vector<wire::SparseRef>>* rows = nullptr,
      const std::vector<uint32_t>* only = nullptr,
      const Values* values = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // SendPush's steps, in order. `only` as marks by block id in *wanted
  // (left empty for every block); InvalidArgument for an id not in the model.
  absl::Status MarkWanted(const std::vector<uint32_t>* only,
                          std::vector<char>* wanted) const;
  // The shards, the push's clock, a report per shard.
  void BeginPush(PushCall* call) ABSL_LOCKS_EXCLUDED(mu_);
  // A request per chunk of wanted blocks, then the sparse rows of each shard
  // (`rows` by shard index) on its first request or one of their own.
  static void AddBlockRequests(const std::vector<char>& wanted, PushCall* call);
  static void AddSparseRequests(
      const std::vector<std::vector<wire::SparseRef>>& rows, PushCall* call);
  // Starts every request and waits for them all, retrying the failed ones;
  // what never got through leaves the window.
  absl::Status RunRequests(PushCall* call) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the requests and waits for gRPC to release the gradient; the
  // status of the values answered.
  absl::Status ReleaseRequests(PushCall* call);
  // An acknowledged push: the clock, counters, *report, and a pause when a
  // shard refused part of it.
  void EndPush(const PushCall& call, PushReport* report)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sends push request `r` of `call` (async) once its shard's window has
  // room; false when a request of `call` failed meanwhile (retry first).
  bool StartRequest(PushCall* call, size_t r) ABSL_LOCKS_EXCLUDED(mu_);
  // Retries the failed requests of `call` one at a time, synchronously.
  absl::Status RetryFailedPushes(PushCall* call) ABSL_LOCKS_EXCLUDED(mu_);
  // Records an acknowledged request: window, staleness, refusal, counters.
  void PushAcknowledged(PushCall* call, PushRequestState* request,
                        const grpc::ByteBuffer& reply) ABSL_LOCKS_EXCLUDED(mu_);
  // Parses `request`'s reply into *response, its values (when the push
  // asked for them) into the caller's params; the status of those values.
  absl::Status ReadPushReply(PushCall* call, PushRequestState* request,
                             const grpc::ByteBuffer& reply,
                             wire::PushAck* response) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends a failed (or fresh) request of `call` until it is acknowledged;
  // on "bucket moved", SplitMovedPush and again.
  absl::Status ResendPush(PushCall* call, PushRequestState* request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Splits `request`'s rows by the owners now: false when they all stay with
  // its shard; else the rest stays in `request`, and a fresh request per
  // other owner, with that shard's next sequence, joins `call` as failed.
  absl::StatusOr<bool> SplitMovedPush(PushCall* call, PushRequestState* request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // PullTables's retries of ps `s`'s `keys` (`first_try` failed, or was not
  // made: null), following moves, into (*values)[t][s].
  absl::Status RetryPullRows(
      const std::vector<TableRows>& tables, int s,
      const std::vector<uint64_t>& keys, const grpc::Status* first_try,
      grpc::ByteBuffer* reply,
      std::vector<std::vector<std::vector<float>>>* values)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The rows of `keys` in `tables` from ps `shard` into (*rows)[t], following
  // moves (`hops` so far, at most kMaxMoveHops).
  absl::Status PullRowsFrom(const std::vector<TableRows>& tables, int shard,
                            const std::vector<uint64_t>& keys, int hops,
                            std::vector<std::vector<float>>* rows)
      ABSL_LOCKS_EXCLUDED(mu_);
  // PullRowsFrom of `keys` that `shard` answered "bucket moved" (`answer`):
  // each owner's keys from it, into their places.
  absl::Status PullSplit(const std::vector<TableRows>& tables, int shard,
                         const std::vector<uint64_t>& keys, int hops,
                         const absl::Status& answer,
                         std::vector<std::vector<float>>* rows)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Positions in `request.ids` of the blocks the placement in use gives
  // another ps than request.shard, by that ps.
  std::map<int, std::vector<size_t>> MovedBlocksByOwner(
      const PushRequestState& request) const ABSL_LOCKS_EXCLUDED(mu_);
  // SplitMovedPush's pieces (by shard) join `call` as failed, each with its
  // shard's next sequence; logged as `moved` keys and blocks from ps `from`.
  void QueuePieces(PushCall* call, int from, int64_t moved,
                   std::map<int, std::unique_ptr<PushRequestState>>* pieces)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The bucket owners and the number of shards of the placement in use.
  std::shared_ptr<const std::vector<int>> OwnersNow(int* shards) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a re-split request and logs it (throttled).
  void NoteMovedLocked(const char* what, int shard, int64_t keys, size_t owners)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Internal: `shard` answered `answer` ("bucket moved") for keys the
  // placement still gives it.
  absl::Status OwnersDisagree(int shard, const absl::Status& answer) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `call` against shard `index` until it succeeds, re-reading the
  // placement after retryable failures.
  // `first_try`: the status of a first try already made (asynchronously).
  // `return_moved`: a "bucket moved" answer is returned (after the placement
  // is read again) instead of retried.
  absl::Status WithRetries(
      int index, const std::string& what,
      const std::function<grpc::Status(const ShardLink&, uint64_t epoch)>& call,
      const grpc::Status* first_try = nullptr, bool return_moved = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // waiting_ bookkeeping of WithRetries: a call of shard `index` starts or
  // stops retrying (`since`: its first failure).
  void StartWaiting(int index, const std::string& address, absl::Time since)
      ABSL_LOCKS_EXCLUDED(mu_);
  void StopWaiting(int index) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const ModelSpec& spec_;
  membership::CoordinatorClient* const coordinator_;
  const RpcSection rpc_;
  const int worker_id_;
  Counters* const counters_;
  const std::function<bool()> should_stop_;
  Clock* const clock_;
  // rpc.encoding: how gradients are pushed and parameters asked for.
  const WireEncoding encoding_;
  const absl::Duration outage_timeout_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const ShardLink>> shards_ ABSL_GUARDED_BY(mu_);
  // The placement's ps of each sparse hash bucket (SparsePs::BucketOwners).
  std::shared_ptr<const std::vector<int>> bucket_owners_ ABSL_GUARDED_BY(mu_);
  std::vector<PushLane> lanes_ ABSL_GUARDED_BY(mu_);  // by shard index
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  // Set with incarnation_, before any push; read by every push request.
  std::atomic<uint64_t> push_key_{0};
  uint64_t start_clock_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pushes_begun_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t acked_clock_ ABSL_GUARDED_BY(mu_) = 0;
  // The pause after a push a ps's push guard refused, before SendPush
  // returns: 25-50 ms (jittered), what the retry of a refused push used to
  // cost. A worker whose gradients the guard refuses does not push again at
  // once: when it did, its pushes raised the median rate the guard's rate
  // bound is drawn from and let a flood through. Nor does it pause long: a
  // worker that has not pushed for 1.25 s leaves the guard's median, and
  // with one worker left there is no rate bound at all (pauses doubling up
  // to 2 s let 60,000 flood pushes through in robustness_test; up to 400 ms
  // let fewer through than before, about 14,000, but the honest workers,
  // paused, no longer repaired the model).
  Backoff refusal_backoff_ ABSL_GUARDED_BY(mu_){absl::Milliseconds(50),
                                                absl::Milliseconds(50)};
  absl::CondVar window_moved_;  // a request was acknowledged or failed
  std::map<int, Waiting> waiting_ ABSL_GUARDED_BY(mu_);  // by shard index
  // Requests re-split after a bucket moved, and when that was last logged.
  int64_t moved_splits_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time moved_logged_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  PushPipeline& push_pipeline() const override { return pushes_; }
  // Last, so that it goes first: its threads call SendPush.
  mutable PushPipeline pushes_;
};

// training.outage_timeout_s as GrpcPsClient's outage_timeout: 0 = forever.
absl::Duration OutageTimeout(double outage_timeout_s);

// What a worker waits for, for its Status and log: "ps 1 at 127.0.0.1:7001
// (unreachable for 12 s; gives up after 300 s, training.outage_timeout_s)".
std::string DescribeOutage(const GrpcPsClient::Outage& outage);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_GRPC_PS_CLIENT_H_
