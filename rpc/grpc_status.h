// Conversions between absl::Status and grpc::Status (the codes share numbers).
#ifndef DOWNPOUR_RPC_GRPC_STATUS_H_
#define DOWNPOUR_RPC_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace downpour {

grpc::Status ToGrpcStatus(const absl::Status& status);

// `what` names the call and peer ("pull from ps 0 at 127.0.0.1:7001") and
// prefixes the message so errors read well when logged far from the call site.
absl::Status FromGrpcStatus(const grpc::Status& status,
                            const std::string& what = "");

}  // namespace downpour

#endif  // DOWNPOUR_RPC_GRPC_STATUS_H_
