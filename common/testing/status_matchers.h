// gmock matchers for absl::Status and StatusOr (our Abseil predates its own).
//
//   EXPECT_THAT(store.Pull(7), StatusIs(absl::StatusCode::kNotFound,
//   HasSubstr("7")));
#ifndef DOWNPOUR_COMMON_TESTING_STATUS_MATCHERS_H_
#define DOWNPOUR_COMMON_TESTING_STATUS_MATCHERS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace downpour::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s;
  return s.ok();
}

MATCHER_P(StatusIs, code, "has status code " + ::testing::PrintToString(code)) {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has status code " + ::testing::PrintToString(code)) {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::Matches(message_matcher)(std::string(s.message()));
}

}  // namespace downpour::testing

#endif  // DOWNPOUR_COMMON_TESTING_STATUS_MATCHERS_H_
