// FirstOutside: the shared scan (common/float_check.h) without maximum or
// norm: |x| as bits against the bound's bits, OR-ed over fixed-size chunks,
// then the offending chunk searched element by element.
#include "common/float_check.h"

#include <cstring>

namespace downpour {

int64_t FirstOutside(const float* x, int64_t n, float bound) {
  uint32_t limit;
  std::memcpy(&limit, &bound, sizeof(limit));
  limit &= 0x7FFFFFFFu;  // -0.0 is 0
  return ScanFloatBits<false, false>(n, limit,
                                     [x](int64_t i) {
                                       uint32_t bits;
                                       std::memcpy(&bits, &x[i], sizeof(bits));
                                       return bits;
                                     })
      .first_bad;
}

}  // namespace downpour
