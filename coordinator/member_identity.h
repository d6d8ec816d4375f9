// Who a member is: the secret key the coordinator issues each registered
// process, and the size bounds every coordinator request must keep before
// anything it carries is stored.
//
//   const std::string key = NewMemberKey();    // 32 hex digits, 128 bits
//   if (!SameKey(request.member_key(), member.key)) -> PERMISSION_DENIED
//   RETURN_IF_ERROR(CheckHeartbeatBounds(request));   // InvalidArgument
#ifndef DOWNPOUR_COORDINATOR_MEMBER_IDENTITY_H_
#define DOWNPOUR_COORDINATOR_MEMBER_IDENTITY_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/coordinator.pb.h"

namespace downpour::coordinator {

// Bounds on what a member reports (bytes).
inline constexpr size_t kMaxAddressBytes = 256;
inline constexpr size_t kMaxRoleBytes = 16;
inline constexpr size_t kMaxKeyBytes = 64;
inline constexpr size_t kMaxDeviceBytes = 256;
inline constexpr size_t kMaxDivergedBytes = 4096;

// The Status counter in which a ps or worker shows the incarnation it was
// registered with (0 before it registered): not a secret. The coordinator
// reads it to tell whether a member's registered process still answers at its
// address.
inline constexpr char kMemberIncarnationCounter[] = "member_incarnation";

// A fresh member key: 16 bytes from getrandom(2) as 32 lowercase hex digits.
// Aborts (after logging) only if the kernel cannot supply randomness, which
// no coordinator can run without.
std::string NewMemberKey();

// A worker process's push key (PushRequest.push_key): 64 random bits, never 0.
uint64_t NewPushKey();

// True when `given` is the non-empty `expected`; compares in time independent
// of where they differ.
bool SameKey(absl::string_view given, absl::string_view expected);

// InvalidArgument, naming the field, its size and the limit, for a request
// whose strings are too long or whose address is missing; "" fields other than
// the address are allowed (a member key is "" on the first registration).
absl::Status CheckRegisterBounds(const proto::RegisterServerRequest& request);
absl::Status CheckRegisterBounds(const proto::RegisterWorkerRequest& request);
absl::Status CheckHeartbeatBounds(const proto::HeartbeatRequest& request);

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_MEMBER_IDENTITY_H_
