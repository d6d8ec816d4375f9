// MemoryBudget: the budget's figure from the config or the host, and the
// eviction a push's new rows need.
#include "server/memory_budget.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

namespace downpour::server {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// The share of the rows that fit an eviction frees beyond what the push
// needs.
constexpr double kLowWatermark = 0.1;

// A file's first line as a byte count; 0 when missing, "max" or not a
// number.
int64_t ReadLimit(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, 4096);
  if (!text.ok()) return 0;
  int64_t bytes = 0;
  const std::string line = std::string(
      absl::StripAsciiWhitespace(*absl::StrSplit(*text, '\n').begin()));
  return absl::SimpleAtoi(line, &bytes) && bytes > 0 ? bytes : 0;
}

// MemTotal of a /proc/meminfo, in bytes; 0 when missing.
int64_t MemTotal(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, 1 << 16);
  if (!text.ok()) return 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) {
      return kib * 1024;
    }
  }
  return 0;
}

// The host of "host:port" ("[::1]:7001" too), as written.
std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

MemoryBudget::HostMemory MemoryBudget::ReadHostMemory(const std::string& root) {
  HostMemory host;
  host.bytes = MemTotal(root + "/proc/meminfo");
  host.source = "MemTotal";
  if (host.bytes == 0) {
    host.bytes = 4 * 1024 * kMiB;
    host.source = "4 GiB (no MemTotal in /proc/meminfo)";
  }
  // A limit at or above the host's memory is no limit (cgroup v1 writes
  // a huge number for "none").
  for (const char* file : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t limit = ReadLimit(root + file);
    if (limit > 0 && limit < host.bytes) {
      host.bytes = limit;
      host.source = absl::StrCat("cgroup ", file);
    }
  }
  return host;
}

MemoryBudget MemoryBudget::ForPs(const Config& config, int index,
                                 const HostMemory& host) {
  const int64_t mb = config.eviction.memory_budget_mb;
  if (mb > 0) {
    return MemoryBudget(mb * kMiB, "eviction.memory_budget_mb");
  }
  const ClusterSection& c = config.cluster;
  const std::string own = index >= 0 && index < static_cast<int>(c.ps.size())
                              ? HostOf(c.ps[index])
                              : std::string();
  int64_t on_host = 0;
  for (const auto* list : {&c.ps, &c.standby_ps}) {
    for (const std::string& address : *list) on_host += HostOf(address) == own;
  }
  on_host = std::max<int64_t>(on_host, 1);
  const int64_t bytes =
      std::max(host.bytes / 2 / on_host, kMinMemoryBudgetMb * kMiB);
  return MemoryBudget(
      bytes, absl::StrCat("eviction.memory_budget_mb 0: half of ",
                          host.bytes / kMiB, " MiB (", host.source,
                          ") shared by ", on_host, " ps on host '", own, "'"));
}

MemoryBudget::MemoryBudget(int64_t budget_bytes, std::string origin)
    : budget_bytes_(budget_bytes), origin_(std::move(origin)) {}

int64_t MemoryBudget::BytesWith(const std::vector<Need>& needs,
                                const std::vector<int64_t>& keep) {
  int64_t bytes = 0;
  for (size_t t = 0; t < needs.size(); ++t) {
    bytes += needs[t].table->BytesAt(keep[t] + needs[t].fresh_keys);
  }
  return bytes;
}

absl::StatusOr<MemoryBudget::Plan> MemoryBudget::PlanFor(
    const std::vector<Need>& needs) const {
  const int64_t limit = table_bytes();
  Plan plan;
  std::vector<int64_t> held(needs.size()), least(needs.size());
  int64_t pending = 0;
  for (size_t t = 0; t < needs.size(); ++t) {
    held[t] = needs[t].table->rows();
    least[t] = std::min(held[t], needs[t].held_keys);
    pending += needs[t].table->pending_bytes();
  }
  plan.bytes_after = BytesWith(needs, held) + pending;
  if (plan.bytes_after <= limit) {
    plan.keep_rows = std::move(held);
    return plan;
  }
  const int64_t floor_bytes = BytesWith(needs, least);
  if (floor_bytes > limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the sparse tables would need ", floor_bytes,
                     " bytes for this push's rows alone, over the ", limit,
                     " bytes they may hold (half of the ps memory budget, ",
                     budget_bytes_ / kMiB, " MiB from ", origin_, ")"));
  }
  // The largest share f of each table's other rows that fits (bytes grow
  // with rows, so a bisection finds it), then 10 % fewer: each eviction
  // makes room for the next pushes, even where the index's doubling makes
  // bytes jump (without that margin every push would evict a little).
  auto keep_at = [&](double f) {
    std::vector<int64_t> keep(needs.size());
    for (size_t t = 0; t < needs.size(); ++t) {
      keep[t] = least[t] + static_cast<int64_t>((held[t] - least[t]) * f);
    }
    return keep;
  };
  double lo = 0, hi = 1;
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    (BytesWith(needs, keep_at(mid)) <= limit ? lo : hi) = mid;
  }
  lo *= 1 - kLowWatermark;
  plan.evict = true;
  plan.keep_rows = keep_at(lo);
  plan.bytes_after = BytesWith(needs, plan.keep_rows);
  return plan;
}

}  // namespace downpour::server
