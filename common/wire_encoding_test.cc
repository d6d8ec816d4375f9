#include "common/wire_encoding.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

static_assert(static_cast<int>(WireEncoding::kFloat32) == proto::FLOAT32);
static_assert(static_cast<int>(WireEncoding::kBf16) == proto::BF16);
static_assert(static_cast<int>(WireEncoding::kFp16) == proto::FP16);

constexpr float kInf = std::numeric_limits<float>::infinity();

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

struct Case {
  float value;
  uint16_t bits;
};

TEST(WireEncodingTest, Bf16KnownValues) {
  const Case cases[] = {
      {1.0f, 0x3F80},
      {-2.5f, 0xC020},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {65504.0f, 0x4780},  // 65536 is the nearest bf16
      // Ties to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
      {1.0f + 0x1.0p-8f, 0x3F80},
      {1.0f + 3 * 0x1.0p-8f, 0x3F82},               // halfway, up to even
      {1.0f + 0x1.0p-8f + 0x1.0p-20f, 0x3F81},      // past halfway: up
      {1.0f + 0x1.0p-8f - 0x1.0p-20f, 0x3F80},      // below halfway: down
      {0x1.0p-133f, 0x0001},                        // smallest subnormal
      {std::numeric_limits<float>::max(), 0x7F80},  // rounds past the max
      {kInf, 0x7F80},
      {-kInf, 0xFF80},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToBf16(c.value), c.bits) << c.value;
  }
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC020), -2.5f);
  EXPECT_EQ(Bf16ToFloat(0x0001), 0x1.0p-133f);
  EXPECT_EQ(Bf16ToFloat(0xFF80), -kInf);
}

TEST(WireEncodingTest, Fp16KnownValues) {
  const Case cases[] = {
      {1.0f, 0x3C00},
      {-2.5f, 0xC100},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {65504.0f, 0x7BFF},               // largest fp16
      {65519.0f, 0x7BFF},               // below the halfway point to 65536
      {65520.0f, 0x7C00},               // halfway: ties to even, which is Inf
      {-1.0e6f, 0xFC00},                // overflow
      {1.0f + 0x1.0p-11f, 0x3C00},      // halfway between 1 and 1 + 2^-10
      {1.0f + 3 * 0x1.0p-11f, 0x3C02},  // halfway, up to even
      {0x1.0p-14f, 0x0400},             // smallest normal
      {0x1.0p-24f, 0x0001},             // smallest subnormal
      {0x1.0p-25f, 0x0000},             // halfway to it: to even, 0
      {0x1.8p-25f, 0x0001},             // past halfway
      {3 * 0x1.0p-25f, 0x0002},         // 1.5 ulps: ties to even, 2
      {0x1.0p-30f, 0x0000},             // underflow
      {-0x1.0p-24f, 0x8001},
      {kInf, 0x7C00},
      {-kInf, 0xFC00},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToFp16(c.value), c.bits) << c.value;
  }
  EXPECT_EQ(Fp16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(Fp16ToFloat(0xC100), -2.5f);
  EXPECT_EQ(Fp16ToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(Fp16ToFloat(0x0001), 0x1.0p-24f);
  EXPECT_EQ(Fp16ToFloat(0x03FF), 1023 * 0x1.0p-24f);  // largest subnormal
  EXPECT_EQ(Fp16ToFloat(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(Fp16ToFloat(0x8000)));
  EXPECT_EQ(Fp16ToFloat(0x7C00), kInf);
  EXPECT_EQ(Fp16ToFloat(0xFC00), -kInf);
}

TEST(WireEncodingTest, NanStaysNan) {
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        // Payload only in bits that bf16 and fp16 drop.
                        FromBits(0x7F800001u), FromBits(0xFF800001u)};
  for (float nan : nans) {
    EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(nan))));
    EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(nan))));
  }
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0x7FC0)));
  EXPECT_TRUE(std::isnan(Fp16ToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(Fp16ToFloat(0x7C01)));  // signalling stays NaN
}

// The loops agree with the scalar conversions, in both directions, and read
// from an unaligned buffer.
TEST(WireEncodingTest, ArraysMatchScalarsAtAnyAlignment) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::vector<float> values(1037);
  for (float& v : values) v = FromBits(any_bits(rng));
  const int64_t n = static_cast<int64_t>(values.size());
  for (WireEncoding encoding : {WireEncoding::kBf16, WireEncoding::kFp16}) {
    std::string buffer(1 + 2 * n, '\0');
    char* unaligned = buffer.data() + 1;
    EncodeFloats(values.data(), n, encoding, unaligned);
    std::vector<float> decoded(n);
    DecodeFloats(unaligned, n, encoding, decoded.data());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, unaligned + 2 * i, 2);
      const bool bf16 = encoding == WireEncoding::kBf16;
      ASSERT_EQ(bits, bf16 ? FloatToBf16(values[i]) : FloatToFp16(values[i]))
          << i;
      const float expected = bf16 ? Bf16ToFloat(bits) : Fp16ToFloat(bits);
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(decoded[i])) << i;
      } else {
        ASSERT_EQ(decoded[i], expected) << i;
      }
    }
  }
}

// Values in the format's normal range come back within half an ulp:
// 2^-8 relative for bf16 (8 significant bits), 2^-11 for fp16 (11).
TEST(WireEncodingTest, RandomRoundTripsWithinRelativeError) {
  struct Format {
    WireEncoding encoding;
    float min_exponent, max_exponent;
    double bound;
  };
  const Format formats[] = {{WireEncoding::kBf16, -120, 120, 0x1.0p-8},
                            {WireEncoding::kFp16, -14, 15, 0x1.0p-11}};
  std::mt19937 rng(1);
  for (const Format& f : formats) {
    std::uniform_real_distribution<float> exponent(f.min_exponent,
                                                   f.max_exponent);
    std::uniform_int_distribution<int> sign(0, 1);
    std::vector<float> values(100000);
    for (float& v : values) {
      v = std::exp2(exponent(rng)) * (sign(rng) ? -1.0f : 1.0f);
    }
    const int64_t n = static_cast<int64_t>(values.size());
    std::string bytes(2 * n, '\0');
    EncodeFloats(values.data(), n, f.encoding, bytes.data());
    std::vector<float> back(n);
    DecodeFloats(bytes.data(), n, f.encoding, back.data());
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::abs(double{back[i]} - values[i]) /
                                  std::abs(double{values[i]}));
    }
    EXPECT_LE(worst, f.bound) << WireEncodingName(f.encoding);
    EXPECT_GT(worst, f.bound / 2) << "suspiciously exact";
  }
}

TEST(WireEncodingTest, Float32IsACopy) {
  const float values[] = {1.5f, -kInf, 0x1.0p-140f};
  char bytes[sizeof(values) + 1];
  EncodeFloats(values, 3, WireEncoding::kFloat32, bytes + 1);
  EXPECT_EQ(std::memcmp(bytes + 1, values, sizeof(values)), 0);
  float back[3];
  DecodeFloats(bytes + 1, 3, WireEncoding::kFloat32, back);
  EXPECT_EQ(std::memcmp(back, values, sizeof(values)), 0);
}

TEST(WireEncodingTest, FindNonFinite) {
  for (WireEncoding encoding :
       {WireEncoding::kFloat32, WireEncoding::kBf16, WireEncoding::kFp16}) {
    std::vector<float> values(3000, 1.0f);
    const int64_t n = static_cast<int64_t>(values.size());
    const int width = BytesPerElement(encoding);
    std::string bytes(width * n, '\0');
    EncodeFloats(values.data(), n, encoding, bytes.data());
    EXPECT_EQ(FindNonFinite(bytes.data(), n, encoding), n);
    values[2500] = std::numeric_limits<float>::quiet_NaN();
    values[2700] = -kInf;
    EncodeFloats(values.data(), n, encoding, bytes.data());
    EXPECT_EQ(FindNonFinite(bytes.data(), n, encoding), 2500);
    values[2500] = 65504.0f;  // finite in every format
    EncodeFloats(values.data(), n, encoding, bytes.data());
    EXPECT_EQ(FindNonFinite(bytes.data(), n, encoding), 2700);
  }
}

TEST(WireEncodingTest, NamesAndSizes) {
  struct {
    const char* name;
    WireEncoding encoding;
    int bytes;
  } const cases[] = {{"float32", WireEncoding::kFloat32, 4},
                     {"bf16", WireEncoding::kBf16, 2},
                     {"fp16", WireEncoding::kFp16, 2}};
  for (const auto& c : cases) {
    absl::StatusOr<WireEncoding> parsed = ParseWireEncoding(c.name);
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, c.encoding);
    EXPECT_EQ(WireEncodingName(c.encoding), c.name);
    EXPECT_EQ(BytesPerElement(c.encoding), c.bytes);
    EXPECT_TRUE(IsKnownWireEncoding(c.encoding));
  }
  EXPECT_THAT(ParseWireEncoding("fp32"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'fp32'; valid: float32, bf16, fp16")));
  const auto seven = static_cast<WireEncoding>(7);
  EXPECT_FALSE(IsKnownWireEncoding(seven));
  EXPECT_EQ(WireEncodingName(seven), "unknown encoding 7");
}

}  // namespace
}  // namespace downpour
