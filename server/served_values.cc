// ServedValues: two copies per (worker, block), each under its worker's mutex.
#include "server/served_values.h"

#include <utility>

namespace downpour::server {

ServedValues::ServedValues(int num_workers) {
  for (int i = 0; i < num_workers; ++i) {
    workers_.push_back(std::make_unique<Worker>());
  }
}

ServedValues::~ServedValues() = default;

ServedValues::Worker* ServedValues::Find(int32_t worker) const {
  if (worker < 0 || worker >= num_workers()) return nullptr;
  return workers_[worker].get();
}

void ServedValues::Record(int32_t worker, uint32_t block, uint64_t version,
                          const float* values, int64_t n) {
  Worker* w = Find(worker);
  if (w == nullptr) return;
  absl::MutexLock lock(&w->mu);
  Copies& copies = w->blocks[block];
  Copy* target = &copies[0];
  for (Copy& copy : copies) {
    if (copy.held && copy.version == version &&
        static_cast<int64_t>(copy.values.size()) == n) {
      return;  // a version names its values: nothing new
    }
    // An empty slot first, else the oldest version.
    if (!copy.held) {
      if (target->held) target = &copy;
    } else if (target->held && copy.version < target->version) {
      target = &copy;
    }
  }
  target->held = true;
  target->version = version;
  target->values.assign(values, values + n);  // reuses the capacity
}

bool ServedValues::Visit(int32_t worker, uint32_t block, uint64_t version,
                         int64_t n,
                         absl::FunctionRef<void(const float*)> use) const {
  const Worker* w = Find(worker);
  if (w == nullptr) return false;
  absl::MutexLock lock(&w->mu);
  auto it = w->blocks.find(block);
  if (it == w->blocks.end()) return false;
  for (const Copy& copy : it->second) {
    if (copy.held && copy.version == version &&
        static_cast<int64_t>(copy.values.size()) == n) {
      use(copy.values.data());
      return true;
    }
  }
  return false;
}

void ServedValues::Forget(uint32_t block) {
  for (const std::unique_ptr<Worker>& w : workers_) {
    absl::MutexLock lock(&w->mu);
    w->blocks.erase(block);
  }
}

int64_t ServedValues::num_floats() const {
  int64_t floats = 0;
  for (const std::unique_ptr<Worker>& w : workers_) {
    absl::MutexLock lock(&w->mu);
    for (const auto& [block, copies] : w->blocks) {
      for (const Copy& copy : copies) {
        if (copy.held) floats += static_cast<int64_t>(copy.values.size());
      }
    }
  }
  return floats;
}

}  // namespace downpour::server
