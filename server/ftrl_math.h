// The FTRL-proximal arithmetic of a sparse row's values (McMahan et al.,
// 2013): one value at a time in double precision, and, with SSE2, two
// neighbouring values at once, bit for bit the same. SparseTable::Update
// calls them; server/sparse_table_test.cc checks the pair against the
// formula written out.
#ifndef DOWNPOUR_SERVER_FTRL_MATH_H_
#define DOWNPOUR_SERVER_FTRL_MATH_H_

#include <cmath>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "server/sparse_table.h"

namespace downpour::server {

// FTRL-proximal (McMahan et al., 2013) of one value: weight *w, z *z, n *n
// and gradient g, in double precision.
inline void FtrlOne(const SparseOptimizer& p, float* w, float* z_state,
                    float* n_state, float g) {
  const double alpha = p.learning_rate;
  const double n_old = *n_state;
  const double n_new = n_old + static_cast<double>(g) * g;
  const double sigma = (std::sqrt(n_new) - std::sqrt(n_old)) / alpha;
  const double z = *z_state + g - sigma * *w;
  *z_state = static_cast<float>(z);
  *n_state = static_cast<float>(n_new);
  if (std::fabs(z) <= p.l1) {
    *w = 0.0f;
  } else {
    const double sign = z < 0 ? -1.0 : 1.0;
    *w = static_cast<float>(-(z - sign * p.l1) /
                            ((p.beta + std::sqrt(n_new)) / alpha + p.l2));
  }
}

#ifdef __SSE2__
// Two floats at `at` into the low half of a register, and back (movq, which
// may alias anything and needs no alignment).
inline __m128 LoadTwo(const float* at) {
  return _mm_castsi128_ps(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(at)));
}
inline void StoreTwo(float* at, __m128 two) {
  _mm_storel_epi64(reinterpret_cast<__m128i*>(at), _mm_castps_si128(two));
}

// FtrlOne of two neighbouring values at once, bit for bit the same: every
// step is the same IEEE operation in the same order (sqrt, division and the
// conversions are correctly rounded in both forms; z's first sum is a float
// sum in both), two lanes wide.
inline void FtrlPair(const SparseOptimizer& p, float* w, float* z_state,
                     float* n_state, const float* g) {
  const __m128d alpha = _mm_set1_pd(p.learning_rate);
  const __m128d l1 = _mm_set1_pd(p.l1);
  const __m128 gf = LoadTwo(g);
  const __m128 zf = LoadTwo(z_state);
  const __m128 nf = LoadTwo(n_state);
  const __m128 wf = LoadTwo(w);
  const __m128d gd = _mm_cvtps_pd(gf);
  const __m128d n_old = _mm_cvtps_pd(nf);
  const __m128d n_new = _mm_add_pd(n_old, _mm_mul_pd(gd, gd));
  const __m128d root_new = _mm_sqrt_pd(n_new);
  const __m128d sigma =
      _mm_div_pd(_mm_sub_pd(root_new, _mm_sqrt_pd(n_old)), alpha);
  const __m128d z = _mm_sub_pd(_mm_cvtps_pd(_mm_add_ps(zf, gf)),
                               _mm_mul_pd(sigma, _mm_cvtps_pd(wf)));
  StoreTwo(z_state, _mm_cvtpd_ps(z));
  StoreTwo(n_state, _mm_cvtpd_ps(n_new));
  const __m128d sign_bit = _mm_set1_pd(-0.0);
  const __m128d negative = _mm_cmplt_pd(z, _mm_setzero_pd());
  const __m128d sign = _mm_or_pd(_mm_and_pd(negative, _mm_set1_pd(-1.0)),
                                 _mm_andnot_pd(negative, _mm_set1_pd(1.0)));
  const __m128d numerator =
      _mm_xor_pd(_mm_sub_pd(z, _mm_mul_pd(sign, l1)), sign_bit);
  const __m128d denominator =
      _mm_add_pd(_mm_div_pd(_mm_add_pd(_mm_set1_pd(p.beta), root_new), alpha),
                 _mm_set1_pd(p.l2));
  const __m128d value = _mm_div_pd(numerator, denominator);
  // |z| <= l1: exactly 0 (false for a NaN z, as in FtrlOne).
  const __m128d zero = _mm_cmple_pd(_mm_andnot_pd(sign_bit, z), l1);
  const __m128d kept = _mm_andnot_pd(zero, value);
  StoreTwo(w, _mm_cvtpd_ps(kept));
}
#endif

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_FTRL_MATH_H_
