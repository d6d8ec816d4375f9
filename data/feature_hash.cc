// FNV-1a is computed byte by byte so that FeatureKey and the token keys can
// continue from the state after "field\x1f" without building the string.
#include "data/feature_hash.h"

#include <utility>

#include "common/sparse_keys.h"

namespace downpour::data {
namespace {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t FnvUpdate(uint64_t h, absl::string_view bytes) {
  for (char c : bytes) {
    h = (h ^ static_cast<unsigned char>(c)) * kFnvPrime;
  }
  return h;
}

uint64_t FnvUpdateByte(uint64_t h, unsigned char c) {
  return (h ^ c) * kFnvPrime;
}

// The FNV state after field + '\x1f'.
uint64_t FieldState(absl::string_view field) {
  return FnvUpdateByte(FnvUpdate(kFnvOffsetBasis, field),
                       static_cast<unsigned char>(kFieldSeparator));
}

bool IsTokenByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

unsigned char AsciiLower(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes) {
  return FnvUpdate(kFnvOffsetBasis, bytes);
}

uint64_t Fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

uint64_t HashBytes(absl::string_view bytes) { return Fmix64(Fnv1a64(bytes)); }

uint64_t FeatureKey(absl::string_view field, absl::string_view value) {
  return Fmix64(FnvUpdate(FieldState(field), value));
}

uint64_t FeatureKeyPrefix(absl::string_view field) { return FieldState(field); }

uint64_t FeatureKeyFrom(uint64_t prefix, absl::string_view value) {
  return Fmix64(FnvUpdate(prefix, value));
}

uint64_t FieldKey(absl::string_view field) { return HashBytes(field); }

uint64_t MixKey(uint64_t key) { return downpour::MixKey(key); }

std::vector<std::string> Tokenize(absl::string_view text) {
  std::vector<std::string> tokens;
  std::string token;
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (IsTokenByte(c)) {
      token += static_cast<char>(AsciiLower(c));
    } else if (!token.empty()) {
      tokens.push_back(std::move(token));
      token.clear();
    }
  }
  if (!token.empty()) tokens.push_back(std::move(token));
  return tokens;
}

void AppendTokenKeys(absl::string_view field, absl::string_view text,
                     std::vector<uint64_t>* keys) {
  const uint64_t start = FieldState(field);
  uint64_t h = start;
  bool in_token = false;
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (IsTokenByte(c)) {
      h = FnvUpdateByte(h, AsciiLower(c));
      in_token = true;
    } else if (in_token) {
      keys->push_back(Fmix64(h));
      h = start;
      in_token = false;
    }
  }
  if (in_token) keys->push_back(Fmix64(h));
}

}  // namespace downpour::data
