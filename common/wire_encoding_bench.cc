// Prints ns per float and GB/s of float32 for each wire encoding's loops:
//   bazel run -c opt //common:wire_encoding_bench [-- floats]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/wire_encoding.h"

namespace downpour {
namespace {

// Best of `rounds` timings of fn(), in ns per float.
template <typename Fn>
double BestNsPerFloat(int64_t n, int rounds, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const absl::Time start = absl::Now();
    fn();
    const double ns = absl::ToDoubleNanoseconds(absl::Now() - start);
    if (ns / n < best) best = ns / n;
  }
  return best;
}

int Main(int64_t n) {
  std::vector<float> values(n), back(n);
  for (int64_t i = 0; i < n; ++i) values[i] = 0.001f * (i % 2001) - 1.0f;
  std::string bytes(4 * n + 1, '\0');
  char* unaligned = bytes.data() + 1;  // as gRPC may hand it over
  std::printf("%lld floats (%.1f MiB float32), best of 20\n",
              static_cast<long long>(n), 4.0 * n / (1 << 20));
  std::printf("%-8s %10s %10s %10s %10s %10s %10s\n", "encoding", "enc ns/f",
              "enc GB/s", "dec ns/f", "dec GB/s", "nan ns/f", "nan GB/s");
  for (WireEncoding e :
       {WireEncoding::kFloat32, WireEncoding::kBf16, WireEncoding::kFp16}) {
    const double enc = BestNsPerFloat(
        n, 20, [&] { EncodeFloats(values.data(), n, e, unaligned); });
    const double dec = BestNsPerFloat(
        n, 20, [&] { DecodeFloats(unaligned, n, e, back.data()); });
    int64_t found = 0;
    const double nan =
        BestNsPerFloat(n, 20, [&] { found += FindNonFinite(unaligned, n, e); });
    // GB/s of float32 values converted (4 bytes a value).
    std::printf("%-8s %10.3f %10.2f %10.3f %10.2f %10.3f %10.2f\n",
                WireEncodingName(e).c_str(), enc, 4 / enc, dec, 4 / dec, nan,
                4 / nan);
    if (found != 20 * n) std::printf("  unexpected NaN/Inf\n");
  }
  return 0;
}

}  // namespace
}  // namespace downpour

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 20);
  return downpour::Main(n);
}
