// Small Status macros (our Abseil 20220623 predates
// RETURN_IF_ERROR/ASSIGN_OR_RETURN).
//
//   RETURN_IF_ERROR(store.Apply(...));
//   ASSIGN_OR_RETURN(auto config, LoadConfig(path));
#ifndef DOWNPOUR_COMMON_STATUS_MACROS_H_
#define DOWNPOUR_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DOWNPOUR_CONCAT_INNER(a, b) a##b
#define DOWNPOUR_CONCAT(a, b) DOWNPOUR_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status _downpour_status = (expr);            \
    if (!_downpour_status.ok()) return _downpour_status; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr)                                          \
  ASSIGN_OR_RETURN_IMPL(DOWNPOUR_CONCAT(_downpour_statusor_, __LINE__), lhs, \
                        expr)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#endif  // DOWNPOUR_COMMON_STATUS_MACROS_H_
