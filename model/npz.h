// NumPy .npz files: a zip archive of .npy arrays, written uncompressed.
//
//   NpzWriter npz;
//   npz.AddFloat32("fc1.weight", {784, 256}, values);
//   npz.AddUint64("keys", {n}, keys);
//   npz.AddString("meta", json);
//   RETURN_IF_ERROR(npz.WriteTo("model.npz"));
//   ASSIGN_OR_RETURN(std::vector<NpyArray> arrays, ReadNpz("model.npz"));
//
// `numpy.load(path)` reads what NpzWriter writes without allow_pickle: float32
// arrays as '<f4', uint64 arrays as '<u8' and strings as 0-d '<U' arrays
// (str(npz["meta"])). ReadNpz reads those three kinds back, stored or
// deflated (np.savez_compressed).
#ifndef DOWNPOUR_MODEL_NPZ_H_
#define DOWNPOUR_MODEL_NPZ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace downpour::model {

// One array of an .npz: float32 or uint64 values in C order, or a string.
struct NpyArray {
  std::string name;              // without ".npy"
  std::vector<int64_t> shape;    // empty for a scalar or a string
  std::vector<float> values;     // float32 arrays ('<f4')
  std::vector<uint64_t> uint64;  // uint64 arrays ('<u8')
  std::string text;              // string arrays (ASCII)
  bool is_string = false;
  bool is_uint64 = false;
};

// Collects arrays, then writes them as one .npz. Not thread-safe.
class NpzWriter {
 public:
  // REQUIRES: the product of shape == values.size().
  void AddFloat32(const std::string& name, std::vector<int64_t> shape,
                  std::vector<float> values);
  // REQUIRES: the product of shape == values.size().
  void AddUint64(const std::string& name, std::vector<int64_t> shape,
                 std::vector<uint64_t> values);
  // A 0-d unicode array. REQUIRES: text is ASCII (escape the rest).
  void AddString(const std::string& name, const std::string& text);
  // Writes the archive atomically (temporary file, then rename).
  // InvalidArgument when an array exceeds 4 GiB (no zip64); the file
  // system's error otherwise, naming the path.
  absl::Status WriteTo(const std::string& path) const;

 private:
  std::vector<NpyArray> arrays_;
};

// The arrays of an .npz in archive order. NotFound when the file is missing;
// InvalidArgument naming the file and the entry when it is not a zip of .npy
// files, or an array is neither little-endian float32, little-endian uint64
// nor a unicode string.
absl::StatusOr<std::vector<NpyArray>> ReadNpz(const std::string& path);

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_NPZ_H_
