#include "core/bootstrap/open_files.h"

#include <sys/resource.h>

#include "gtest/gtest.h"

namespace hvd::bootstrap {
namespace {

rlimit Current() {
  rlimit limit{};
  EXPECT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  return limit;
}

TEST(OpenFilesTest, NeedsASocketPerPeerAndAsksRoomForTheFramework) {
  EXPECT_EQ(OpenFilesFor(2).required, 34);
  EXPECT_EQ(OpenFilesFor(2).wanted, 258);
  EXPECT_EQ(OpenFilesFor(16384).required, 16416);
}

// One test changes the process's limits in order: raising a low soft limit,
// leaving a high one alone, stopping at the hard limit, and refusing when
// even what is required is past it.
TEST(OpenFilesTest, RaisesTheSoftLimitUpToTheHardOneAndNamesItBeyond) {
  rlimit limit = Current();
  ASSERT_TRUE(limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= 2048)
      << "the test needs a hard limit of 2048 open files or more";
  limit.rlim_cur = 512;
  limit.rlim_max = 2048;  // a process may lower its own hard limit
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);

  ASSERT_TRUE(EnsureOpenFiles({1000, 1500}).ok());
  EXPECT_EQ(Current().rlim_cur, 1500u);

  ASSERT_TRUE(EnsureOpenFiles({600, 1000}).ok());
  EXPECT_EQ(Current().rlim_cur, 1500u) << "a higher soft limit is kept";

  ASSERT_TRUE(EnsureOpenFiles({1800, 4000}).ok());
  EXPECT_EQ(Current().rlim_cur, 2048u) << "as far as the hard limit allows";

  const absl::Status s = EnsureOpenFiles(OpenFilesFor(4096));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("needs 4128 open files"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("hard limit on open files is 2048"),
            std::string::npos)
      << s;
  EXPECT_EQ(Current().rlim_cur, 2048u) << "a refusal changes nothing";
}

}  // namespace
}  // namespace hvd::bootstrap
