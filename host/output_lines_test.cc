#include "host/output_lines.h"

#include <string>

#include "gtest/gtest.h"

namespace hvd {
namespace host {
namespace {

TEST(LineSplitter, HandsOutWholeLinesOnly) {
  LineSplitter s;
  EXPECT_EQ(s.Add("ab"), "");
  EXPECT_EQ(s.Add("c\nde"), "abc\n");
  EXPECT_EQ(s.Add("f\ng\nh"), "def\ng\n");
  EXPECT_EQ(s.Flush(), "h\n");
  EXPECT_EQ(s.Flush(), "");
}

TEST(LineSplitter, CutsOverlongLines) {
  LineSplitter s;
  std::string big(LineSplitter::kMaxLine + 10, 'x');
  std::string out = s.Add(big);
  EXPECT_EQ(out.size(), LineSplitter::kMaxLine + 1);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(s.Flush(), std::string(10, 'x') + "\n");
}

}  // namespace
}  // namespace host
}  // namespace hvd
