// A fast scan for the values a gradient must not hold: NaN, infinities and
// magnitudes above a bound. One pass over the bits, in chunks the compiler
// vectorises; the worker checks every gradient with it before it leaves.
//
//   if (int64_t i = FirstOutside(grad, n, bound); i < n) { ... grad[i] ... }
#ifndef DOWNPOUR_COMMON_FLOAT_CHECK_H_
#define DOWNPOUR_COMMON_FLOAT_CHECK_H_

#include <cstdint>

namespace downpour {

// The index of the first x[i] that is not within [-bound, bound] (NaN never
// is), or n when every one is. REQUIRES: bound >= 0 (FLT_MAX: only NaN and
// infinities are outside).
int64_t FirstOutside(const float* x, int64_t n, float bound);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_FLOAT_CHECK_H_
