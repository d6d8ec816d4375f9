// In-memory parameters with SGD on push.
#include "worker/testing/fake_ps_client.h"

#include <algorithm>
#include <utility>

namespace downpour::worker {

FakePsClient::FakePsClient(std::vector<float> params, int num_blocks,
                           float learning_rate)
    : learning_rate_(learning_rate),
      params_(std::move(params)),
      versions_(num_blocks, 0) {}

absl::Status FakePsClient::Pull(float* params,
                                std::vector<uint64_t>* versions) {
  absl::MutexLock lock(&mu_);
  std::copy(params_.begin(), params_.end(), params);
  *versions = versions_;
  ++pulls_;
  return absl::OkStatus();
}

absl::Status FakePsClient::Push(const float* grad,
                                const std::vector<uint64_t>&) {
  absl::MutexLock lock(&mu_);
  if (fail_pushes_) return absl::InvalidArgumentError("push: gradient has NaN");
  pushed_sum_ += grad[0];
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i] -= learning_rate_ * grad[i];
  for (uint64_t& v : versions_) ++v;
  ++pushes_;
  return absl::OkStatus();
}

void FakePsClient::FailPushes() {
  absl::MutexLock lock(&mu_);
  fail_pushes_ = true;
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
