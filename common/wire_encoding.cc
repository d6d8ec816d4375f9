// Wire encodings: branch-free scalar conversions that gcc vectorises.
#include "common/wire_encoding.h"

#include <cmath>
#include <cstring>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "wire encodings copy 16-bit values as they are: little-endian hosts only"
#endif

namespace downpour {
namespace {

inline uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint16_t Load16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void Store16(char* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

// cond ? a : b as bit arithmetic. gcc does not if-convert a ?: whose arms hold
// float arithmetic (it might trap), which would keep the loops scalar.
inline uint32_t Select(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

// Index of the first of the n values of type T at src whose bits under
// `exponent` are all ones (NaN or Inf), or n. Chunks are OR-ed without an early
// exit so that the loop vectorises; only a chunk with a hit is searched again.
template <typename T>
int64_t FindExponentAllOnes(const char* src, int64_t n, T exponent) {
  const auto hit = [&](int64_t i) {
    T v;
    std::memcpy(&v, src + sizeof(T) * i, sizeof(T));
    return static_cast<T>(v & exponent) == exponent;
  };
  constexpr int64_t kChunk = 1024;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = n < start + kChunk ? n : start + kChunk;
    T any = 0;
    for (int64_t i = start; i < end; ++i) any |= static_cast<T>(hit(i));
    if (any == 0) continue;
    for (int64_t i = start; i < end; ++i) {
      if (hit(i)) return i;
    }
  }
  return n;
}

}  // namespace

// bf16 keeps float32's top half. Adding 0x7FFF plus the lowest kept bit rounds
// to nearest even; Inf (mantissa 0) is unchanged by it and a finite value that
// rounds past the largest bf16 becomes Inf, as IEEE rounding does. A NaN could
// lose its whole mantissa (and become Inf) by truncation, so it gets the quiet
// bit set instead.
uint16_t FloatToBf16(float value) {
  const uint32_t bits = FloatBits(value);
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  const bool is_nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

float Bf16ToFloat(uint16_t bits) {
  return BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

// After Marat Dukhan's FP16 library (fp16_ieee_from_fp32_value): the float
// unit does the rounding. Scaling |value| by 2^112 then 2^-110 overflows
// what fp16 cannot hold to Inf; adding 2^(e+...) with the exponent the fp16
// result will have (at least the subnormal one) shifts the mantissa so that
// the hardware rounds it to nearest even at fp16's precision, subnormals
// included. Needs round-to-nearest and no flush-to-zero (our default: no
// -ffast-math).
uint16_t FloatToFp16(float value) {
  constexpr float kScaleToInf = 0x1.0p+112f;
  constexpr float kScaleToZero = 0x1.0p-110f;
  float base = (std::fabs(value) * kScaleToInf) * kScaleToZero;
  const uint32_t w = FloatBits(value);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = Select(bias < 0x71000000u, 0x71000000u, bias);
  base = BitsToFloat((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = FloatBits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  // shl1_w > 0xFF000000: NaN; it becomes fp16's canonical quiet NaN.
  return static_cast<uint16_t>((sign >> 16) |
                               Select(shl1_w > 0xFF000000u, 0x7E00u, nonsign));
}

// Also after fp16_ieee_to_fp32_value: normal values (and Inf/NaN) by moving
// the exponent and mantissa into place and rescaling; subnormals by the
// "magic number" subtraction, exact in float.
float Fp16ToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  constexpr uint32_t kExpOffset = 0xE0u << 23;
  constexpr float kExpScale = 0x1.0p-112f;
  const float normalized = BitsToFloat((two_w >> 4) + kExpOffset) * kExpScale;
  constexpr uint32_t kMagicMask = 126u << 23;
  constexpr float kMagicBias = 0.5f;
  const float denormalized =
      BitsToFloat((two_w >> 17) | kMagicMask) - kMagicBias;
  constexpr uint32_t kDenormalizedCutoff = 1u << 27;
  return BitsToFloat(sign | Select(two_w < kDenormalizedCutoff,
                                   FloatBits(denormalized),
                                   FloatBits(normalized)));
}

bool IsKnownWireEncoding(WireEncoding encoding) {
  switch (encoding) {
    case WireEncoding::kFloat32:
    case WireEncoding::kBf16:
    case WireEncoding::kFp16:
      return true;
  }
  return false;
}

int BytesPerElement(WireEncoding encoding) {
  return encoding == WireEncoding::kFloat32 ? 4 : 2;
}

std::string WireEncodingName(WireEncoding encoding) {
  switch (encoding) {
    case WireEncoding::kFloat32:
      return "float32";
    case WireEncoding::kBf16:
      return "bf16";
    case WireEncoding::kFp16:
      return "fp16";
  }
  return absl::StrCat("unknown encoding ", static_cast<int32_t>(encoding));
}

absl::StatusOr<WireEncoding> ParseWireEncoding(std::string_view name) {
  for (WireEncoding encoding :
       {WireEncoding::kFloat32, WireEncoding::kBf16, WireEncoding::kFp16}) {
    if (name == WireEncodingName(encoding)) return encoding;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown wire encoding '", std::string(name),
                   "'; valid: float32, bf16, fp16"));
}

void EncodeFloats(const float* src, int64_t n, WireEncoding encoding,
                  char* dst) {
  switch (encoding) {
    case WireEncoding::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case WireEncoding::kBf16:
      for (int64_t i = 0; i < n; ++i) Store16(dst + 2 * i, FloatToBf16(src[i]));
      return;
    case WireEncoding::kFp16:
      for (int64_t i = 0; i < n; ++i) Store16(dst + 2 * i, FloatToFp16(src[i]));
      return;
  }
}

void DecodeFloats(const char* src, int64_t n, WireEncoding encoding,
                  float* dst) {
  switch (encoding) {
    case WireEncoding::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case WireEncoding::kBf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(Load16(src + 2 * i));
      return;
    case WireEncoding::kFp16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFloat(Load16(src + 2 * i));
      return;
  }
}

int64_t FindNonFinite(const char* src, int64_t n, WireEncoding encoding) {
  switch (encoding) {
    case WireEncoding::kFloat32:
      return FindExponentAllOnes<uint32_t>(src, n, 0x7F800000u);
    case WireEncoding::kBf16:
      return FindExponentAllOnes<uint16_t>(src, n, 0x7F80u);
    case WireEncoding::kFp16:
      return FindExponentAllOnes<uint16_t>(src, n, 0x7C00u);
  }
  return n;
}

}  // namespace downpour
