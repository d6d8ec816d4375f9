// How float32 values travel on the wire: as they are, or narrowed to bf16 or
// fp16 (half the bytes). The ps keeps float32 master weights; only the copies
// in flight are narrowed.
//
//   ASSIGN_OR_RETURN(WireEncoding encoding, ParseWireEncoding("bf16"));
//   std::string bytes(n * BytesPerElement(encoding), '\0');
//   EncodeFloats(grad, n, encoding, bytes.data());
//   ...
//   DecodeFloats(bytes.data(), n, encoding, params);
//
// Encoded bytes are little-endian, 16 bits per element for bf16/fp16, and may
// sit at any address. Narrowing rounds to nearest, ties to even; NaN stays a
// (quiet) NaN and Inf stays Inf. Widening is exact. All functions are
// thread-safe and allocate nothing.
#ifndef DOWNPOUR_COMMON_WIRE_ENCODING_H_
#define DOWNPOUR_COMMON_WIRE_ENCODING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace downpour {

// The values match proto/ps.proto's `Encoding` (FLOAT32 = 0, BF16 = 1,
// FP16 = 2), so a proto field converts with a static_cast. A value cast from
// the wire may be none of these: check IsKnownWireEncoding before use.
enum class WireEncoding : int32_t {
  kFloat32 = 0,  // IEEE binary32, as in memory
  kBf16 = 1,     // bfloat16: float32's top 16 bits (8 exponent, 7 mantissa)
  kFp16 = 2,     // IEEE binary16 (5 exponent, 10 mantissa; max 65504)
};

// True for the three values above.
bool IsKnownWireEncoding(WireEncoding encoding);

// 4 for kFloat32, 2 for kBf16 and kFp16.
// REQUIRES: IsKnownWireEncoding(encoding).
int BytesPerElement(WireEncoding encoding);

// "float32", "bf16", "fp16"; "unknown encoding 7" for any other value.
std::string WireEncodingName(WireEncoding encoding);

// "float32", "bf16" or "fp16"; InvalidArgument otherwise:
// "unknown wire encoding 'fp32'; valid: float32, bf16, fp16".
absl::StatusOr<WireEncoding> ParseWireEncoding(std::string_view name);

// Writes n values of src to dst in `encoding` (n * BytesPerElement bytes).
// REQUIRES: IsKnownWireEncoding(encoding); dst does not overlap src.
void EncodeFloats(const float* src, int64_t n, WireEncoding encoding,
                  char* dst);

// Reads n values in `encoding` from src (any alignment) into dst.
// REQUIRES: IsKnownWireEncoding(encoding); dst does not overlap src.
void DecodeFloats(const char* src, int64_t n, WireEncoding encoding,
                  float* dst);

// Index of the first NaN or Inf among the n values in `encoding` at src (any
// alignment), or n when all are finite. A value is NaN/Inf encoded exactly
// when it is NaN/Inf decoded. REQUIRES: IsKnownWireEncoding(encoding).
int64_t FindNonFinite(const char* src, int64_t n, WireEncoding encoding);

// Scalar conversions, as the loops above do them (for tests and callers that
// convert one value).
uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t bits);
uint16_t FloatToFp16(float value);
float Fp16ToFloat(uint16_t bits);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_WIRE_ENCODING_H_
