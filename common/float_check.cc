// FirstOutside: |x| as bits against the bound's bits, OR-ed over fixed-size
// chunks (a loop of known trip count, which vectorises), then the offending
// chunk searched element by element.
#include "common/float_check.h"

#include <cmath>
#include <cstring>

namespace downpour {

int64_t FirstOutside(const float* x, int64_t n, float bound) {
  uint32_t limit;
  std::memcpy(&limit, &bound, sizeof(limit));
  constexpr int64_t kChunk = 1024;
  int64_t start = 0;
  for (; start + kChunk <= n; start += kChunk) {
    uint32_t flags = 0;
    for (int64_t i = 0; i < kChunk; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &x[start + i], sizeof(bits));
      // |x| beyond the limit (NaN and infinity included, as their bits lie
      // above every finite value's) wraps the subtraction: top bit set.
      flags |= limit - (bits & 0x7FFFFFFFu);
    }
    if ((flags & 0x80000000u) != 0) break;
  }
  for (int64_t i = start; i < n; ++i) {
    if (!(std::fabs(x[i]) <= bound)) return i;
  }
  return n;
}

}  // namespace downpour
