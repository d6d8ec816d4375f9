#include "common/config.h"
#include "gtest/gtest.h"
TEST(ConfigTest, Placeholder) {}
