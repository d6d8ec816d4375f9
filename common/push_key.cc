// PushKeyDigest: SHA-256 from OpenSSL's libcrypto.
#include "common/push_key.h"

#include <openssl/sha.h>

#include <cstring>

namespace downpour {
namespace {

constexpr char kLabel[] = "downpour push key v1";

void PutLittleEndian(uint64_t value, int bytes, unsigned char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = (value >> (8 * i)) & 0xff;
}

}  // namespace

uint64_t PushKeyDigest(int32_t worker, uint64_t incarnation,
                       uint64_t push_key) {
  unsigned char input[sizeof(kLabel) + 4 + 8 + 8];
  std::memcpy(input, kLabel, sizeof(kLabel));
  unsigned char* at = input + sizeof(kLabel);
  PutLittleEndian(static_cast<uint32_t>(worker), 4, at);
  PutLittleEndian(incarnation, 8, at + 4);
  PutLittleEndian(push_key, 8, at + 12);
  unsigned char hash[SHA256_DIGEST_LENGTH];
  SHA256(input, sizeof(input), hash);
  uint64_t digest = 0;
  for (int i = 0; i < 8; ++i) digest |= uint64_t{hash[i]} << (8 * i);
  return digest == 0 ? 1 : digest;
}

bool PushKeyMatches(int32_t worker, uint64_t incarnation, uint64_t push_key,
                    uint64_t digest) {
  return (PushKeyDigest(worker, incarnation, push_key) ^ digest) == 0;
}

}  // namespace downpour
