// Feature hashing: the fixed 64-bit hash that turns categorical values, text
// tokens and numeric columns into the uint64 keys of a sparse model, so that
// the same example gets the same keys in training, export and predict.
//
//   uint64_t k = FeatureKey("color", "red");   // HashBytes("color\x1fred")
//   uint64_t w = FieldKey("loan_amnt");        // HashBytes("loan_amnt")
//   shard = MixKey(k) % buckets;               // what the ps does with a key
//
// The functions are pure, thread-safe, and the same on every platform and
// build (no std::hash, no absl::Hash, no seed): a key written down today is
// the same key in every later version. docs/DATA.md, "Sparse (hashed)
// features", gives the arithmetic to recompute a key in any language.
#ifndef DOWNPOUR_DATA_FEATURE_HASH_H_
#define DOWNPOUR_DATA_FEATURE_HASH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace downpour::data {

// The byte between a field's name and its value in FeatureKey (ASCII "unit
// separator"). A field name must not contain it, so that the encoding
// field + '\x1f' + value stays one-to-one (the CSV reader refuses such a
// name); a value may.
inline constexpr char kFieldSeparator = '\x1f';

// 64-bit FNV-1a of the bytes: h = 0xcbf29ce484222325 (the offset basis);
// for each byte b: h = (h ^ b) * 0x100000001b3, modulo 2^64.
uint64_t Fnv1a64(absl::string_view bytes);

// MurmurHash3's 64-bit finalizer (fmix64): k ^= k >> 33;
// k *= 0xff51afd7ed558ccd; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53;
// k ^= k >> 33 (modulo 2^64). A bijection; spreads FNV's weak low bits.
uint64_t Fmix64(uint64_t k);

// The hash of a byte string: Fmix64(Fnv1a64(bytes)). Bytes as given: no
// lower-casing, no trimming, no Unicode normalization.
uint64_t HashBytes(absl::string_view bytes);

// The key of value `value` of field `field` (a categorical value, a text
// token, a numeric bucket "b<i>"): HashBytes(field + '\x1f' + value).
uint64_t FeatureKey(absl::string_view field, absl::string_view value);

// FeatureKey in two steps, for loops that hash many values of one field
// without building field + '\x1f' + value: FeatureKeyPrefix(field) is the
// FNV-1a state after field + '\x1f', and
// FeatureKeyFrom(FeatureKeyPrefix(field), value) == FeatureKey(field, value).
uint64_t FeatureKeyPrefix(absl::string_view field);
uint64_t FeatureKeyFrom(uint64_t prefix, absl::string_view value);

// The key of a numeric field used as a value (its weight multiplies the
// number): HashBytes(field). Differs from every FeatureKey as long as field
// names hold no '\x1f'.
uint64_t FieldKey(absl::string_view field);

// What the ps applies to a key before `% buckets` to pick its bucket (and so
// its shard): the finalizer of SplitMix64 (Stafford's "Mix13"):
// z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9; z = (z ^ (z >> 27)) *
// 0x94d049bb133111eb; z ^ (z >> 31) (modulo 2^64). A bijection, so distinct
// keys stay distinct; it matters for keys that are not hashes (LIBSVM indices
// 1, 2, 3, ... or ids with a stride), which `key % n` would put on a few
// shards. Keys themselves are stored unmixed.
uint64_t MixKey(uint64_t key);

// The tokens of `text`: runs of [a-z0-9] after ASCII lower-casing; every
// other byte (space, punctuation, control, and each byte of a non-ASCII UTF-8
// character) separates tokens. "Don't STOP-2x!" -> {"don", "t", "stop",
// "2x"}. Repeats are kept, in order.
std::vector<std::string> Tokenize(absl::string_view text);

// Appends FeatureKey(field, token) for each token of `text` (as Tokenize cuts
// them, repeats kept) to *keys, without building the token strings.
void AppendTokenKeys(absl::string_view field, absl::string_view text,
                     std::vector<uint64_t>* keys);

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_FEATURE_HASH_H_
