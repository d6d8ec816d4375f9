// A PredictRequest's examples, decoded from its little-endian bytes and
// checked for form (sizes, offsets, finite values, the daemon's limits)
// before any model is looked at: what ModelServer hands a Scorer
// (serve/scorer.h), which then checks what depends on the model.
#ifndef DOWNPOUR_SERVE_EXAMPLES_H_
#define DOWNPOUR_SERVE_EXAMPLES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/serve.pb.h"

namespace downpour::serve {

// A plain value (it points into the request it was decoded from).
struct Examples {
  // The dense form (PredictRequest.dense and .features) or the sparse one.
  bool dense_form = false;
  int64_t count = 0;  // examples
  // Sparse form (CSR): example i's entries are [offsets[i], offsets[i + 1]).
  std::vector<uint64_t> keys;
  std::vector<float> values;
  std::vector<uint32_t> offsets;
  // The request's `fields` bytes (uint16 LE, one per key, or empty); the
  // scorer decodes them only for a model that pools fields.
  const std::string* fields = nullptr;
  // Dense form: count x features floats, row-major.
  int features = 0;
  std::vector<float> dense;
};

// The daemon's limits on one request (ModelServer::Options).
struct RequestLimits {
  int64_t max_examples = 65536;
  int64_t max_request_bytes = 16 << 20;
};

// Decodes `request` into *examples. InvalidArgument naming the problem
// (every message starts "predict: "): sparse form: more than
// max_request_bytes bytes of keys, values, offsets and fields; keys not a
// multiple of 8 bytes, values of 4, offsets of 4; keys and values of
// different counts; fields neither empty nor one uint16 per key; no offsets;
// more than max_examples examples; offsets[0] not 0, decreasing, or the last
// not the number of keys; a NaN or infinite value. Dense form: keys, values,
// offsets or fields not empty; features 0; more than max_request_bytes bytes;
// dense not a whole number of examples of `features` floats; more than
// max_examples examples; a NaN or infinite value.
// `request` must outlive *examples.
absl::Status DecodeExamples(const proto::PredictRequest& request,
                            const RequestLimits& limits, Examples* examples);

}  // namespace downpour::serve

#endif  // DOWNPOUR_SERVE_EXAMPLES_H_
