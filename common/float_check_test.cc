#include "common/float_check.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace downpour {
namespace {

// Every position (first chunk, a later chunk, the tail past the last whole
// chunk) and every kind of bad value is found, and only the first one.
TEST(FirstOutsideTest, FindsTheFirstBadValueWherever) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float max = std::numeric_limits<float>::max();
  for (int64_t n : {0, 1, 7, 1024, 1025, 5000}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * (i % 7);
    EXPECT_EQ(FirstOutside(x.data(), n, 6.0f), n) << n;
    EXPECT_EQ(FirstOutside(x.data(), n, max), n) << n;
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      if (at < 0 || at >= n) continue;
      for (float bad : {nan, -nan, inf, -inf, 6.5f, -6.5f}) {
        std::vector<float> y = x;
        y[at] = bad;
        if (at + 1 < n) y[n - 1] = nan;  // a later one is not reported
        EXPECT_EQ(FirstOutside(y.data(), n, 6.0f), at)
            << "n " << n << " at " << at << " value " << bad;
        if (std::isnan(bad) || std::isinf(bad)) {
          EXPECT_EQ(FirstOutside(y.data(), n, max), at) << n << " " << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace downpour
