#include "model/npz.h"

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::model {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::TempPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NpzTest, Uint64ArraysRoundTripBesideFloatsAndStrings) {
  const std::vector<uint64_t> keys = {0, 1, (uint64_t{1} << 63) + 5,
                                      std::numeric_limits<uint64_t>::max()};
  NpzWriter npz;
  npz.AddFloat32("bias", {1}, {0.25f});
  npz.AddUint64("keys", {4}, keys);
  npz.AddUint64("grid", {2, 2}, keys);
  npz.AddString("meta", "{}");
  const std::string path = TempPath("u64.npz");
  ASSERT_THAT(npz.WriteTo(path), IsOk());

  absl::StatusOr<std::vector<NpyArray>> arrays = ReadNpz(path);
  ASSERT_THAT(arrays, IsOk());
  ASSERT_EQ(arrays->size(), 4u);
  const NpyArray& bias = (*arrays)[0];
  EXPECT_FALSE(bias.is_uint64);
  EXPECT_THAT(bias.values, ElementsAre(0.25f));
  const NpyArray& read = (*arrays)[1];
  EXPECT_EQ(read.name, "keys");
  EXPECT_TRUE(read.is_uint64);
  EXPECT_FALSE(read.is_string);
  EXPECT_THAT(read.shape, ElementsAre(4));
  EXPECT_EQ(read.uint64, keys);
  EXPECT_TRUE(read.values.empty());
  EXPECT_THAT((*arrays)[2].shape, ElementsAre(2, 2));
  EXPECT_EQ((*arrays)[2].uint64, keys);
  EXPECT_TRUE((*arrays)[3].is_string);
  EXPECT_EQ((*arrays)[3].text, "{}");

  // NumPy's dtype for little-endian uint64, and the values' bytes as written.
  absl::StatusOr<std::string> bytes = ReadFile(path);
  ASSERT_THAT(bytes, IsOk());
  EXPECT_THAT(*bytes, HasSubstr("{'descr': '<u8', 'fortran_order': False, "
                                "'shape': (4,), }"));
  EXPECT_THAT(*bytes, HasSubstr(std::string("\x05\0\0\0\0\0\0\x80", 8)));
}

TEST(NpzTest, EmptyUint64ArrayRoundTrips) {
  NpzWriter npz;
  npz.AddUint64("keys", {0}, {});
  const std::string path = TempPath("empty.npz");
  ASSERT_THAT(npz.WriteTo(path), IsOk());
  absl::StatusOr<std::vector<NpyArray>> arrays = ReadNpz(path);
  ASSERT_THAT(arrays, IsOk());
  EXPECT_TRUE((*arrays)[0].is_uint64);
  EXPECT_THAT((*arrays)[0].shape, ElementsAre(0));
  EXPECT_TRUE((*arrays)[0].uint64.empty());
}

TEST(NpzTest, RefusesAUint64ArrayWhoseShapeDoesNotFitItsBytes) {
  NpzWriter npz;
  npz.AddUint64("keys", {3}, {1, 2, 3});
  const std::string path = TempPath("short.npz");
  ASSERT_THAT(npz.WriteTo(path), IsOk());
  absl::StatusOr<std::string> bytes = ReadFile(path);
  ASSERT_THAT(bytes, IsOk());
  // The same header length, another count: the archive stays readable.
  std::string patched = *bytes;
  const size_t at = patched.find("'shape': (3,)");
  ASSERT_NE(at, std::string::npos);
  patched[at + 10] = '9';
  ASSERT_THAT(WriteFileAtomically(path, patched), IsOk());
  EXPECT_THAT(ReadNpz(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected 9 uint64s, got 24 bytes")));
}

TEST(NpzTest, RefusesOtherIntegerTypes) {
  NpzWriter npz;
  npz.AddUint64("keys", {1}, {7});
  const std::string path = TempPath("i8.npz");
  ASSERT_THAT(npz.WriteTo(path), IsOk());
  absl::StatusOr<std::string> bytes = ReadFile(path);
  ASSERT_THAT(bytes, IsOk());
  std::string patched = *bytes;
  const size_t at = patched.find("'<u8'");
  ASSERT_NE(at, std::string::npos);
  patched[at + 2] = 'i';  // int64: a key above 2^63 would read negative
  ASSERT_THAT(WriteFileAtomically(path, patched), IsOk());
  EXPECT_THAT(ReadNpz(path), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("unsupported array type")));
}

}  // namespace
}  // namespace downpour::model
