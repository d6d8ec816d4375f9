// absl <-> gRPC status conversion. The codes are numerically identical; the
// static_asserts keep it that way.
#include "rpc/grpc_status.h"

#include "absl/strings/str_cat.h"

namespace downpour {
namespace {

#define DOWNPOUR_SAME_CODE(absl_code, grpc_code)                   \
  static_assert(static_cast<int>(absl::StatusCode::absl_code) ==   \
                    static_cast<int>(grpc::StatusCode::grpc_code), \
                #absl_code " differs between absl and gRPC")

DOWNPOUR_SAME_CODE(kOk, OK);
DOWNPOUR_SAME_CODE(kCancelled, CANCELLED);
DOWNPOUR_SAME_CODE(kUnknown, UNKNOWN);
DOWNPOUR_SAME_CODE(kInvalidArgument, INVALID_ARGUMENT);
DOWNPOUR_SAME_CODE(kDeadlineExceeded, DEADLINE_EXCEEDED);
DOWNPOUR_SAME_CODE(kNotFound, NOT_FOUND);
DOWNPOUR_SAME_CODE(kAlreadyExists, ALREADY_EXISTS);
DOWNPOUR_SAME_CODE(kPermissionDenied, PERMISSION_DENIED);
DOWNPOUR_SAME_CODE(kResourceExhausted, RESOURCE_EXHAUSTED);
DOWNPOUR_SAME_CODE(kFailedPrecondition, FAILED_PRECONDITION);
DOWNPOUR_SAME_CODE(kAborted, ABORTED);
DOWNPOUR_SAME_CODE(kOutOfRange, OUT_OF_RANGE);
DOWNPOUR_SAME_CODE(kUnimplemented, UNIMPLEMENTED);
DOWNPOUR_SAME_CODE(kInternal, INTERNAL);
DOWNPOUR_SAME_CODE(kUnavailable, UNAVAILABLE);
DOWNPOUR_SAME_CODE(kDataLoss, DATA_LOSS);
DOWNPOUR_SAME_CODE(kUnauthenticated, UNAUTHENTICATED);

#undef DOWNPOUR_SAME_CODE

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status,
                            const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  if (!what.empty()) message = absl::StrCat(what, ": ", message);
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      message);
}

}  // namespace downpour
