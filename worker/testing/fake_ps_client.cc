// In-memory parameters with SGD on push.
#include "worker/testing/fake_ps_client.h"

#include <algorithm>
#include <utility>

namespace downpour::worker {

FakePsClient::FakePsClient(std::vector<float> params, int num_blocks,
                           float learning_rate, int max_pushes_in_flight)
    : learning_rate_(learning_rate),
      params_(std::move(params)),
      versions_(num_blocks, 0),
      pipeline_(max_pushes_in_flight,
                [this](const float* grad, const std::vector<uint64_t>& versions,
                       PushReport* report) {
                  return Apply(grad, versions, report);
                }) {}

absl::Status FakePsClient::Pull(float* params,
                                std::vector<uint64_t>* versions) {
  absl::MutexLock lock(&mu_);
  std::copy(params_.begin(), params_.end(), params);
  *versions = versions_;
  ++pulls_;
  return absl::OkStatus();
}

bool FakePsClient::Admit() {
  max_concurrent_ = std::max(max_concurrent_, ++concurrent_);
  if (hold_) {
    ++blocked_;
    mu_.Await(absl::Condition(
        +[](int* allowed) { return *allowed > 0; }, &allowed_));
    --allowed_;
    --blocked_;
  }
  --concurrent_;
  return !fail_pushes_;
}

void FakePsClient::UseBlocks(const std::vector<BlockSpec>& blocks) {
  absl::MutexLock lock(&mu_);
  blocks_ = blocks;
}

absl::Status FakePsClient::PushPullBlocks(const float* grad,
                                          const std::vector<uint64_t>& versions,
                                          const std::vector<uint32_t>& ids,
                                          PushReport* report, float* params,
                                          std::vector<uint64_t>* fresh) {
  absl::MutexLock lock(&mu_);
  if (blocks_.empty()) {
    return PsClient::PushPullBlocks(grad, versions, ids, report, params, fresh);
  }
  if (!Admit()) return absl::InvalidArgumentError("push: gradient has NaN");
  const bool refused = Refuse(report);
  for (uint32_t id : ids) {
    const BlockSpec& block = blocks_[id];
    if (refused) {  // the values as held, nothing applied
      std::copy(params_.begin() + block.offset,
                params_.begin() + block.offset + block.length,
                params + block.offset);
      (*fresh)[id] = versions_[id];
      continue;
    }
    if (report != nullptr) {
      report->staleness.Record(versions_[id] - versions[id]);
    }
    for (int64_t i = block.offset; i < block.offset + block.length; ++i) {
      params_[i] -= learning_rate_ * grad[i];
      params[i] = params_[i];
    }
    (*fresh)[id] = ++versions_[id];
    if (block.offset == 0) pushed_sum_ += grad[0];
  }
  return absl::OkStatus();
}

std::vector<uint64_t> FakePsClient::versions() const {
  absl::MutexLock lock(&mu_);
  return versions_;
}

absl::Status FakePsClient::Apply(const float* grad,
                                 const std::vector<uint64_t>& versions,
                                 PushReport* report) {
  absl::MutexLock lock(&mu_);
  if (!Admit()) return absl::InvalidArgumentError("push: gradient has NaN");
  if (Refuse(report)) return absl::OkStatus();
  if (report != nullptr) {
    for (size_t b = 0; b < versions_.size(); ++b)
      report->staleness.Record(versions_[b] - versions[b]);
  }
  pushed_sum_ += grad[0];
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i] -= learning_rate_ * grad[i];
  for (uint64_t& v : versions_) ++v;
  ++pushes_;
  return absl::OkStatus();
}

void FakePsClient::HoldPushes() {
  absl::MutexLock lock(&mu_);
  hold_ = true;
}

void FakePsClient::AllowPushes(int n) {
  absl::MutexLock lock(&mu_);
  allowed_ += n;
}

bool FakePsClient::AwaitBlockedPushes(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return blocked_ >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

int FakePsClient::max_concurrent_pushes() const {
  absl::MutexLock lock(&mu_);
  return max_concurrent_;
}

void FakePsClient::FailPushes() {
  absl::MutexLock lock(&mu_);
  fail_pushes_ = true;
}

void FakePsClient::RefusePushes(int n) {
  absl::MutexLock lock(&mu_);
  to_refuse_ += n;
}

int FakePsClient::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

bool FakePsClient::Refuse(PushReport* report) {
  if (to_refuse_ == 0) return false;
  --to_refuse_;
  ++refused_;
  if (report != nullptr) {
    report->AddRefusal("push: refused by the fake ps's push guard");
  }
  return true;
}

int FakePsClient::pulls() const {
  absl::MutexLock lock(&mu_);
  return pulls_;
}

int FakePsClient::pushes() const {
  absl::MutexLock lock(&mu_);
  return pushes_;
}

double FakePsClient::pushed_sum() const {
  absl::MutexLock lock(&mu_);
  return pushed_sum_;
}

std::vector<float> FakePsClient::params() const {
  absl::MutexLock lock(&mu_);
  return params_;
}

}  // namespace downpour::worker
