// LogThrottle: per-key windows under one mutex.
#include "common/log_throttle.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace downpour {
namespace {

std::string Cut(absl::string_view message) {
  if (message.size() <= LogThrottle::kMaxMessageLength) {
    return std::string(message);
  }
  return absl::StrCat(message.substr(0, LogThrottle::kMaxMessageLength), "...");
}

}  // namespace

LogThrottle::LogThrottle(Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()) {}

std::string LogThrottle::Summary(absl::string_view key,
                                 const KeyState& state) const {
  return absl::StrCat(key, ": ", state.suppressed, " more in the last ",
                      absl::FormatDuration(options_.interval),
                      " (last: ", state.last, ")");
}

std::vector<std::string> LogThrottle::Record(absl::string_view key,
                                             absl::string_view message) {
  const absl::Time now = clock_->Now();
  std::vector<std::string> lines;
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (keys_.size() >= options_.max_keys) SweepLocked(now, &lines);
    if (keys_.size() >= options_.max_keys) key = kOverflowKey;
    it = keys_.try_emplace(key, KeyState{now}).first;
  }
  KeyState& state = it->second;
  if (now - state.window_start >= options_.interval) {
    if (state.suppressed > 0) lines.push_back(Summary(it->first, state));
    state = KeyState{now};
  }
  if (state.logged < options_.full_per_interval) {
    ++state.logged;
    lines.push_back(Cut(message));
  } else {
    ++state.suppressed;
    state.last = Cut(message);
  }
  return lines;
}

std::vector<std::string> LogThrottle::Flush() {
  const absl::Time now = clock_->Now();
  std::vector<std::string> lines;
  absl::MutexLock lock(&mu_);
  SweepLocked(now, &lines);
  return lines;
}

void LogThrottle::SweepLocked(absl::Time now, std::vector<std::string>* lines) {
  for (auto it = keys_.begin(); it != keys_.end();) {
    if (now - it->second.window_start < options_.interval) {
      ++it;
      continue;
    }
    if (it->second.suppressed > 0) {
      lines->push_back(Summary(it->first, it->second));
    }
    keys_.erase(it++);
  }
}

void LogThrottle::Log(spdlog::logger* log, spdlog::level::level_enum level,
                      absl::string_view key, absl::string_view message) {
  for (const std::string& line : Record(key, message)) {
    log->log(level, "{}", line);
  }
}

size_t LogThrottle::num_keys() const {
  absl::MutexLock lock(&mu_);
  return keys_.size();
}

}  // namespace downpour
