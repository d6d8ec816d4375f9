// Decoding and form checks of a PredictRequest's two forms.
#include "serve/examples.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace downpour::serve {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the request's bytes are little-endian and copied as they are");

// A bytes field as n little-endian values of T (copied: a protobuf string's
// bytes need not be aligned for T).
template <typename T>
std::vector<T> Decode(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// The sizes of the sparse form; the example count in *examples.
absl::Status CheckSparseSizes(const proto::PredictRequest& request,
                              const RequestLimits& limits, int64_t* examples) {
  const std::string& k = request.keys();
  const std::string& v = request.values();
  const std::string& o = request.offsets();
  const int64_t bytes = static_cast<int64_t>(k.size() + v.size() + o.size() +
                                             request.fields().size());
  if (bytes > limits.max_request_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: the request holds ", bytes,
        " bytes of keys, values and "
        "offsets; at most ",
        limits.max_request_bytes,
        " (--max_request_bytes): send fewer examples per request"));
  }
  if (k.size() % 8 != 0 || v.size() % 4 != 0 || o.size() % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("predict: keys, values and offsets are ", k.size(), ", ",
                     v.size(), " and ", o.size(),
                     " bytes; they must be uint64, float32 and uint32 "
                     "little-endian arrays (multiples of 8, 4 and 4 bytes)"));
  }
  if (k.size() / 8 != v.size() / 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("predict: ", k.size() / 8, " keys but ", v.size() / 4,
                     " values; each key needs its value"));
  }
  const std::string& f = request.fields();
  if (!f.empty() && f.size() != k.size() / 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("predict: fields is ", f.size(),
                     " bytes; it holds one uint16 per key (", k.size() / 4,
                     " bytes) or nothing"));
  }
  if (o.empty()) {
    return absl::InvalidArgumentError(
        "predict: offsets is empty; it holds examples + 1 uint32 entries "
        "(0, then where each example ends)");
  }
  *examples = static_cast<int64_t>(o.size() / 4) - 1;
  if (*examples > limits.max_examples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: the request holds ", *examples, " examples; at most ",
        limits.max_examples, " (--max_examples): split it"));
  }
  return absl::OkStatus();
}

absl::Status DecodeSparse(const proto::PredictRequest& request,
                          const RequestLimits& limits, Examples* examples) {
  int64_t n = 0;
  if (absl::Status ok = CheckSparseSizes(request, limits, &n); !ok.ok()) {
    return ok;
  }
  const int64_t num_keys = static_cast<int64_t>(request.keys().size() / 8);
  std::vector<uint32_t> offsets = Decode<uint32_t>(request.offsets());
  if (offsets[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("predict: offsets[0] is ", offsets[0], "; it must be 0"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("predict: offsets[", i + 1, "] = ", offsets[i + 1],
                       " is below offsets[", i, "] = ", offsets[i],
                       "; offsets must not decrease"));
    }
  }
  if (offsets[n] != num_keys) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: the last offset is ", offsets[n], " but the request holds ",
        num_keys, " keys; it must be the number of keys"));
  }
  std::vector<float> values = Decode<float>(request.values());
  for (int64_t e = 0, i = 0; i < num_keys; ++i) {
    if (std::isfinite(values[i])) continue;
    while (offsets[e + 1] <= i) ++e;  // the example holding entry i
    return absl::InvalidArgumentError(
        absl::StrCat("predict: value ", i, " (example ", e, ") is ", values[i],
                     "; values must be finite"));
  }
  examples->dense_form = false;
  examples->count = n;
  examples->keys = Decode<uint64_t>(request.keys());
  examples->values = std::move(values);
  examples->offsets = std::move(offsets);
  examples->fields = &request.fields();
  return absl::OkStatus();
}

absl::Status DecodeDense(const proto::PredictRequest& request,
                         const RequestLimits& limits, Examples* examples) {
  if (!request.keys().empty() || !request.values().empty() ||
      !request.offsets().empty() || !request.fields().empty()) {
    return absl::InvalidArgumentError(
        "predict: the request holds both dense rows and keys, values, offsets "
        "or fields; send one form: dense and features for a dense model, the "
        "rest for a sparse one");
  }
  const std::string& d = request.dense();
  const int64_t features = request.features();
  if (features == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: dense holds ", d.size(),
        " bytes but features is 0; set it to the floats per example (the "
        "model's inputs)"));
  }
  if (static_cast<int64_t>(d.size()) > limits.max_request_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: the request holds ", d.size(),
        " bytes of dense rows; at "
        "most ",
        limits.max_request_bytes,
        " (--max_request_bytes): send fewer examples per request"));
  }
  if (d.size() % (4 * features) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: dense is ", d.size(),
        " bytes, not a whole number of "
        "examples of ",
        features, " float32 features (", 4 * features, " bytes each)"));
  }
  const int64_t n = static_cast<int64_t>(d.size()) / (4 * features);
  if (n > limits.max_examples) {
    return absl::InvalidArgumentError(
        absl::StrCat("predict: the request holds ", n, " examples; at most ",
                     limits.max_examples, " (--max_examples): split it"));
  }
  std::vector<float> dense = Decode<float>(d);
  for (size_t i = 0; i < dense.size(); ++i) {
    if (std::isfinite(dense[i])) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: feature ", i % features, " of example ", i / features, " is ",
        dense[i], "; values must be finite"));
  }
  examples->dense_form = true;
  examples->count = n;
  examples->features = static_cast<int>(features);
  examples->dense = std::move(dense);
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeExamples(const proto::PredictRequest& request,
                            const RequestLimits& limits, Examples* examples) {
  if (!request.dense().empty() || request.features() != 0) {
    return DecodeDense(request, limits, examples);
  }
  return DecodeSparse(request, limits, examples);
}

}  // namespace downpour::serve
