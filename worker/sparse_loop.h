// The worker loop of a sparse model: logistic (task binary) or linear (task
// regression) regression over hashed feature keys, one weight per key in
// sparse table 0 and a dense bias (model.type sparse_linear), plus, for
// model.type fm, pairwise interactions through a k-float embedding per key
// in sparse table 1 (a factorization machine: model/fm_math.h), or, for
// model.type wide_deep, an MLP (the dense blocks) over each field's pooled
// embeddings from table 1, added to the weights' sum (model/wide_deep_math.h;
// the MLP runs on the compute backend: OpenBLAS or cuBLAS).
//
// Each step takes the next training.batch_size examples of its part, sorts
// and de-duplicates their keys, pulls those rows (and the bias) from the
// shards that serve them, computes the loss and the gradient of each unique
// key (summed over the examples that hold it) and of the bias (the batch
// mean) and
// pushes the rows (of both tables for fm) with the bias gradient in one
// exactly-once push. Keys,
// gradients and values travel as byte arrays (server/sparse_table.h).
//
// Every training.eval_every_steps steps, and at the end, it evaluates the
// current model on the test set (its keys pulled without creating rows):
// AUC, logloss and accuracy, or RMSE, MAE and R², as the dense loop reports
// them (WorkerStats).
//
// One thread runs Run(); Stop() and stats() from any thread. With
// training.fetch after_push a step waits for its pull and its push; with
// overlap or layerwise the next step's batch and rows are prepared, and
// pushes sent, on threads of their own (worker/sparse_step_pipeline.h).
#ifndef DOWNPOUR_WORKER_SPARSE_LOOP_H_
#define DOWNPOUR_WORKER_SPARSE_LOOP_H_

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/log_throttle.h"
#include "common/model_spec.h"
#include "common/push_view.h"
#include "data/sparse_dataset.h"
#include "model/wide_deep_math.h"
#include "worker/compute_backend.h"
#include "worker/push_pipeline.h"
#include "worker/sparse_batches.h"
#include "worker/sparse_ps.h"
#include "worker/sparse_step_pipeline.h"
#include "worker/training_loop.h"

namespace downpour::worker {

// fm.scale_step's factor for row r of `data`: 1 / max(1, sum_i |x_i|). The
// gradient of the pairwise term in v_if, x_i (s_f - v_if x_i) with s_f =
// sum_j v_jf x_j, grows with the example's keys (with n keys of value 1 it
// sums n - 1 embeddings), so at one rate an example of 300 keys moves each
// embedding ~300 times as far as one of 1; the factor makes an example's
// step in the pairwise term about independent of its size.
double EmbeddingStepScale(const data::SparseDataset& data, int64_t r);

class SparseLoop : public TrainingLoop {
 public:
  struct Options {
    TrainingSection training;
    int worker_index = 0;
    // cluster.ps; the placement may name more (ps added while training).
    int num_shards = 1;
    // Send each key's occurrence count with its gradient (the ps's
    // admission needs them: config admission.*).
    bool send_counts = false;
    // wide_deep: the backend that runs the MLP (borrowed; built for the
    // spec's layers and training.batch_size examples), and the pooling
    // (wide_deep.pooling mean, else sum). Null for sparse_linear and fm.
    ComputeBackend* backend = nullptr;
    bool mean_pooling = true;
    // fm: each example's embedding gradient is scaled by
    // EmbeddingStepScale (config fm.scale_step).
    bool fm_scale_step = false;
    // compute.device simulated (sparse_linear, fm): a step's compute, real
    // gradients on the CPU, lasts at least this long (the rest slept), as a
    // slower machine's would: the scale model slows compute and links by
    // the same factor (bench/scale_model). Zero: no wait.
    absl::Duration simulated_compute = absl::ZeroDuration();
    // Benchmarks: the same steps without talking to the ps (rows and dense
    // parameters stay zero, nothing is pushed), the worker's rate with
    // communication off (bench/sparse_worker).
    bool no_communication = false;
  };

  // Borrows spec, ps and test; they must outlive the loop. Trains on the
  // batches `train` gives until it has no more (or training.steps, when
  // set, are done).
  // REQUIRES: spec has sparse table 0 of dim 1, and perhaps table 1 (fm's
  // or wide_deep's embeddings) with the same buckets; its dense tensors are
  // the bias (sparse_linear, fm) or, with options.backend, wide_deep's MLP.
  SparseLoop(const ModelSpec& spec, SparsePs* ps,
             std::unique_ptr<SparseBatches> train, const SparseTestSet* test,
             Options options);
  // The same over a training set in memory: training.steps batches, or
  // training.epochs over `train` in a fresh shuffle each epoch (seeded
  // with training.seed and the worker's index), evaluated on `test`.
  SparseLoop(const ModelSpec& spec, SparsePs* ps,
             std::shared_ptr<const data::SparseDataset> train,
             const data::SparseDataset* test, Options options);

  // Trains until the configured steps/epochs are done or Stop(), then
  // evaluates the final model. The first pull or push error ends it.
  absl::Status Run() override;
  void Stop() override { stop_.store(true); }
  WorkerStats stats() const override ABSL_LOCKS_EXCLUDED(mu_);
  StalenessHistogram staleness() const override ABSL_LOCKS_EXCLUDED(mu_);

  // The keys of rows [begin, end) of `data`, sorted and unique, into *keys,
  // and for each entry its position among them into *slot.
  static void UniqueKeys(const data::SparseDataset& data,
                         const std::vector<int64_t>& rows,
                         std::vector<uint64_t>* keys,
                         std::vector<uint32_t>* slot);

 private:
  // Pulls the rows of sorted unique `keys`: table 0's weights into
  // *weights (one a key) and, for fm, table 1's embeddings into *embeddings
  // (fm_dim_ a key), both in one request per ps.
  absl::Status PullRows(const std::vector<uint64_t>& keys,
                        std::vector<float>* weights,
                        std::vector<float>* embeddings);
  // The raw output of example `r` of `data`, whose entries' positions among
  // the pulled keys are slot[first..]; weights and (fm) embeddings as
  // pulled. Fills fm_s_ (fm) for the gradient.
  double Margin(const data::SparseDataset& data, int64_t r,
                const uint32_t* slot, double bias,
                const std::vector<float>& weights,
                const std::vector<float>& embeddings);
  // Draws the next batch into *in, sorts its keys and pulls their rows and
  // the dense parameters (on the prefetch thread with training.fetch
  // overlap or layerwise); false when no batch is left.
  absl::StatusOr<bool> PrepareStep(int batch, SparseStepInput* in);
  // One step over step_ (its rows pulled): compute, then push by shard
  // through `pushes`, counted when it is acknowledged. `waited`: the time
  // taken waiting for step_ (Take).
  absl::Status Step(StepPusher* pushes, absl::Duration waited);
  // sparse_linear and fm: forward and backward over the pulled rows, the
  // keys' gradients into grads_ (and embedding_grads_), the bias's into
  // dense_grad_[0]; returns the summed loss. Internal when it diverged.
  absl::StatusOr<double> LinearGradients(const std::vector<int64_t>& rows);
  // The step's keys and gradients split by the ps that owns each key, with
  // the dense gradient and versions, into *push (its refs point into it).
  absl::Status RowsByShard(SparseStepPush* push);
  // The refs of *push's per-shard rows (table 0, and table 1 for fm and
  // wide_deep), with counts when `with_counts`.
  void AddRefs(SparseStepPush* push, bool with_counts) const;
  // The steps of Run: take each prepared step, compute it and start its
  // push, evaluating every training.eval_every_steps; *ran_out false when
  // Stop() ended them. The first error.
  absl::Status TrainSteps(int batch, StepPrefetcher* prefetch,
                          StepPusher* pushes, bool* ran_out);
  // Sends a step's push; under async also takes the dense values it is
  // answered with as the next steps' (PublishDense). Push threads.
  absl::Status SendStep(SparseStepPush* push, PushReport* report)
      ABSL_LOCKS_EXCLUDED(dense_mu_);
  // The dense values and versions a push was answered with become the ones
  // the next prepared steps compute on, block by block where newer (pushes
  // may end out of order).
  void PublishDense(const SparseStepPush& push) ABSL_LOCKS_EXCLUDED(dense_mu_);
  // The dense parameters for a prepared step: the last pushes' answer when
  // there is one (no pull), else pulled.
  absl::Status DenseFor(SparseStepInput* in) ABSL_LOCKS_EXCLUDED(dense_mu_);
  // Counts an acknowledged push in stats_ (refused: only refused_steps, and
  // a throttled warning), and its staleness. Any thread.
  void CountStep(const PushReport& report, const SparseStepPush& push)
      ABSL_LOCKS_EXCLUDED(mu_);
  // wide_deep's forward and backward over the pulled rows: the MLP's
  // gradient into dense_grad_, the embeddings' into embedding_grads_, the
  // weights' into grads_; returns the summed loss.
  absl::StatusOr<double> WideDeepGradients(const std::vector<int64_t>& rows);
  // wide_deep's margin of example r (the exported model's scoring).
  float WideDeepMargin(const data::SparseDataset& data, int64_t r,
                       const uint32_t* slot, const std::vector<float>& params,
                       const std::vector<float>& weights,
                       const std::vector<float>& embeddings);
  // The ps of `key` under `owners` (SparsePs::BucketOwners; null: the
  // coordinator's rule); FailedPrecondition when the placement names no ps
  // for its bucket (worker/bucket_split.h OwnerOfKey).
  absl::StatusOr<int> ShardOf(uint64_t key,
                              const std::vector<int>* owners) const;
  // The shards a step's keys are split over: cluster.ps, or more where the
  // placement gives buckets to ps added while training. Counted once per
  // placement (owners_mu_).
  int ShardCount(const std::shared_ptr<const std::vector<int>>& owners)
      ABSL_LOCKS_EXCLUDED(owners_mu_);
  // The metrics of the current model on the test sample (`all` false) or
  // on every test row (the final evaluation), into stats_.
  absl::Status Evaluate(bool all);
  // The margins of `test`'s rows under the current model, appended to
  // *outputs.
  absl::Status Score(const data::SparseDataset& test,
                     std::vector<float>* outputs);
  // The first log line: what is trained on what.
  void LogStart(int batch) const;
  // Marks the run finished (when `status` is OK and it `ran_out` of
  // batches, not stopped) or diverged, logs the final metrics and any
  // saturation warning, and returns `status`.
  absl::Status Finish(absl::Status status, bool ran_out)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After a step: the mean loss since the last call, examples/s, the shares
  // of the wall time and the staleness quantiles into stats_.
  void UpdateRates() ABSL_LOCKS_EXCLUDED(mu_);

  const ModelSpec& spec_;
  SparsePs* const ps_;
  const std::unique_ptr<SparseBatches> train_;
  // Owned when made from a test set in memory; test_ points to it.
  std::unique_ptr<SparseTestSet> own_test_;
  const SparseTestSet* test_;
  const Options options_;
  const uint32_t buckets_;
  // fm, wide_deep: the embeddings' dim (sparse table 1); 0 for
  // sparse_linear.
  const int fm_dim_;
  const bool wide_deep_;  // options_.backend != null
  // training.fetch overlap or layerwise (not under bsp): prefetch and push
  // in the background (worker/sparse_step_pipeline.h).
  const bool overlap_;
  std::atomic<bool> stop_{false};

  // Compute thread only: the step's batch, its rows' epochs, keys and
  // pulled rows (rows 0..n-1: batch_rows_), and scratch reused across
  // steps.
  SparseStepInput step_;
  std::vector<int64_t> batch_rows_;
  std::vector<float> grads_;
  // fm: the batch keys' gradients in the embeddings (fm_dim_ a key), an
  // example's gathered rows, and sum_i v_if x_i per factor.
  std::vector<float> embedding_grads_;
  std::vector<float> gathered_w_;
  std::vector<const float*> gathered_v_;
  std::vector<double> fm_s_;
  std::vector<uint32_t> counts_;  // per unique key of the batch
  std::vector<float> dense_grad_;
  // The prefetch thread's (PrepareStep): all rows of the batch it draws.
  std::vector<int64_t> prepare_rows_;
  // wide_deep: the batch as compute_backend.h's PooledBatch, the wide
  // margins, targets, d loss / d output per row, and scoring scratch.
  std::vector<int64_t> batch_offsets_;
  std::vector<uint16_t> batch_fields_;
  std::vector<float> pool_weights_;
  std::vector<float> wide_;
  std::vector<float> targets_;
  std::vector<float> out_grad_;
  model::WideDeepScratch wide_deep_scratch_;

  // async: the dense values the last acknowledged pushes were answered
  // with (SendStep), which saves each step its own pull of them.
  const bool reuse_push_values_;
  absl::Mutex dense_mu_;
  bool have_dense_ ABSL_GUARDED_BY(dense_mu_) = false;
  std::vector<float> latest_dense_ ABSL_GUARDED_BY(dense_mu_);
  std::vector<uint64_t> latest_versions_ ABSL_GUARDED_BY(dense_mu_);

  // ShardCount's last placement and its count.
  absl::Mutex owners_mu_;
  std::shared_ptr<const std::vector<int>> counted_owners_
      ABSL_GUARDED_BY(owners_mu_);
  int counted_shards_ ABSL_GUARDED_BY(owners_mu_) = 0;

  mutable absl::Mutex mu_;
  WorkerStats stats_ ABSL_GUARDED_BY(mu_);
  // The last evaluation's share of saturated predictions (Metrics), for the
  // warning at the end of Run.
  double saturated_ ABSL_GUARDED_BY(mu_) = NAN;
  StalenessHistogram staleness_ ABSL_GUARDED_BY(mu_);
  LogThrottle refusal_log_{{}};               // refused pushes
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;  // since the last report
  int64_t loss_steps_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time start_ ABSL_GUARDED_BY(mu_);
  absl::Duration compute_ ABSL_GUARDED_BY(mu_);
  absl::Duration wait_pull_ ABSL_GUARDED_BY(mu_);
  absl::Duration wait_push_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SPARSE_LOOP_H_
