#include "core/common/random_hex.h"

#include "gtest/gtest.h"

namespace hvd {
namespace {

TEST(RandomHex, TwoDigitsPerByteAndNeverTheSameTwice) {
  absl::StatusOr<std::string> a = RandomHex(32);
  absl::StatusOr<std::string> b = RandomHex(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(RandomHex(0).value(), "");
}

}  // namespace
}  // namespace hvd
