#include "common/host_port.h"

#include "gtest/gtest.h"

namespace downpour {
namespace {

TEST(HostPortTest, SplitsHostAndPort) {
  std::optional<HostPort> v4 = SplitHostPort("10.0.0.2:7001");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->host, "10.0.0.2");
  EXPECT_EQ(v4->port, "7001");
  std::optional<HostPort> v6 = SplitHostPort("[::1]:7000");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "7000");
  std::optional<HostPort> name = SplitHostPort("ps-0.downpour:0");
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(name->host, "ps-0.downpour");
  EXPECT_EQ(name->port, "0");
}

TEST(HostPortTest, AnAddressWithoutAPortDoesNotSplit) {
  EXPECT_FALSE(SplitHostPort("host").has_value());
  EXPECT_FALSE(SplitHostPort("host:").has_value());
  EXPECT_FALSE(SplitHostPort("::1").has_value());
  EXPECT_FALSE(SplitHostPort("").has_value());
}

TEST(HostPortTest, HostOfDropsThePortAndTheBrackets) {
  EXPECT_EQ(HostOf("10.0.0.2:7001"), "10.0.0.2");
  EXPECT_EQ(HostOf("ps-0.example.org:7001"), "ps-0.example.org");
  EXPECT_EQ(HostOf("[::1]:7000"), "::1");
  EXPECT_EQ(HostOf("[::1]"), "::1");
  EXPECT_EQ(HostOf("host"), "host");
  EXPECT_EQ(HostOf("::1"), "::1");
}

}  // namespace
}  // namespace downpour
