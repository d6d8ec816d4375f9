// Fast scans for the values a gradient must not hold: NaN, infinities and
// magnitudes above a bound. One pass over the bits, in chunks the compiler
// vectorises. The worker checks every gradient with FirstOutside before it
// leaves; the ps checks (and measures) every pushed one with ScanFloatBits,
// in any wire encoding (server/block_store.cc).
//
//   if (int64_t i = FirstOutside(grad, n, bound); i < n) { ... grad[i] ... }
//
//   GradientScan s = ScanFloatBits(n, limit_bits, /*want_max=*/true,
//                                  /*want_norm=*/true,
//                                  [p](int64_t i) { return LoadFloatBits(p + 4
//                                  * i); });
//
// The templates compile where they are used: build those files with -O3 (or
// the project's vectorising copts) for the chunk loops to vectorise.
#ifndef DOWNPOUR_COMMON_FLOAT_CHECK_H_
#define DOWNPOUR_COMMON_FLOAT_CHECK_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace downpour {

// The index of the first x[i] that is not within [-bound, bound] (NaN never
// is), or n when every one is. REQUIRES: bound >= 0 (FLT_MAX: only NaN and
// infinities are outside).
int64_t FirstOutside(const float* x, int64_t n, float bound);

// Unaligned-safe; compiles to a plain load.
inline uint32_t LoadFloatBits(const unsigned char* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return bits;
}

namespace float_check_internal {
typedef float V4f __attribute__((vector_size(16)));
typedef uint32_t V4u __attribute__((vector_size(16)));
}  // namespace float_check_internal

// What one pass over a gradient finds.
struct GradientScan {
  int64_t first_bad;      // index of the first element past the limit, or n
  uint32_t max_abs_bits;  // largest |element| as float32 bits
  double norm_sq;         // sum of squares (only when asked for)
};

// |x| as float32 bits: NaN/Inf exceed every finite float, and finite floats
// order as these bits do.
inline uint32_t AbsBits(uint32_t bits) { return bits & 0x7FFFFFFFu; }

// One pass over the n float32 elements that load(i) gives (bits): the first
// whose |x| bits exceed `limit` (< 2^31; NaN/Inf always exceed FLT_MAX's),
// the largest |x| when kMax, and the sum of squares when kNorm. The chunk
// loop has no early exit and no compare so that it vectorises (SSE2): limit -
// |x| has bit 31 set exactly when |x| > limit, and OR-ing collects it; only a
// chunk past the limit is searched again. Elements within the limit are
// finite, so the float max and sum are exact.
template <bool kMax, bool kNorm, typename Load>
inline GradientScan ScanFloatBits(int64_t n, uint32_t limit, Load load) {
  constexpr int64_t kChunk = 1024;
  // Independent partial maxima and sums: one running sum would chain every
  // add on the one before (float addition does not reassociate), several
  // times slower than the rest of the pass; lanes vectorise.
  constexpr int kLanes = 16;
  using float_check_internal::V4f;
  using float_check_internal::V4u;
  GradientScan scan{n, 0, 0.0};
  float max_abs = 0.0f;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = std::min(n, start + kChunk);
    uint32_t flags = 0;
    float lane_max[kLanes] = {}, lane_sq[kLanes] = {};
    auto visit = [&](int64_t i, int lane) {
      const uint32_t abs_bits = AbsBits(load(i));
      flags |= limit - abs_bits;
      if (kMax || kNorm) {
        float a;
        std::memcpy(&a, &abs_bits, sizeof(a));
        if (kMax) lane_max[lane] = a > lane_max[lane] ? a : lane_max[lane];
        if (kNorm) lane_sq[lane] += a * a;
      }
    };
    int64_t i = start;
    if constexpr (kMax || kNorm) {
      // Four vectors of four lanes (GCC/clang vector extensions: SSE2).
      V4u vflags = {0, 0, 0, 0};
      V4f vmax[4] = {}, vsq[4] = {};
      const V4u vlimit = {limit, limit, limit, limit};
      const V4u vmask = {0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu};
      for (; i + kLanes <= end; i += kLanes) {
        for (int v = 0; v < 4; ++v) {
          const int64_t j = i + 4 * v;
          const V4u bits =
              V4u{load(j), load(j + 1), load(j + 2), load(j + 3)} & vmask;
          vflags |= vlimit - bits;
          V4f a;
          std::memcpy(&a, &bits, sizeof(a));
          if (kMax) vmax[v] = a > vmax[v] ? a : vmax[v];
          if (kNorm) vsq[v] += a * a;
        }
      }
      for (int k = 0; k < 4; ++k) flags |= vflags[k];
      for (int v = 0; v < 4; ++v) {
        for (int k = 0; k < 4; ++k) {
          lane_max[4 * v + k] = vmax[v][k];
          lane_sq[4 * v + k] = vsq[v][k];
        }
      }
    }
    for (; i < end; ++i) visit(i, 0);
    if ((flags & 0x80000000u) != 0) {
      for (int64_t j = start; j < end; ++j) {
        if (AbsBits(load(j)) > limit) return GradientScan{j, 0, 0.0};
      }
    }
    float chunk_max = 0.0f, sum_sq = 0.0f;
    for (int k = 0; k < kLanes; ++k) {
      chunk_max = std::max(chunk_max, lane_max[k]);
      sum_sq += lane_sq[k];
    }
    max_abs = std::max(max_abs, chunk_max);
    scan.norm_sq += sum_sq;
  }
  std::memcpy(&scan.max_abs_bits, &max_abs, sizeof(max_abs));
  return scan;
}

// ScanFloatBits with kMax and kNorm chosen at run time.
template <typename Load>
inline GradientScan ScanFloatBits(int64_t n, uint32_t limit, bool want_max,
                                  bool want_norm, Load load) {
  if (want_norm) {
    return want_max ? ScanFloatBits<true, true>(n, limit, load)
                    : ScanFloatBits<false, true>(n, limit, load);
  }
  if (want_max) return ScanFloatBits<true, false>(n, limit, load);
  return ScanFloatBits<false, false>(n, limit, load);
}

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_FLOAT_CHECK_H_
