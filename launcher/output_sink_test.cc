#include "launcher/output_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "host/fake_os.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

TEST(PrefixLines, HorovodrunFormat) {
  EXPECT_EQ(PrefixLines(3, host::OutputStream::kStdout, "a\nb\n"),
            "[3]<stdout>:a\n[3]<stdout>:b\n");
  EXPECT_EQ(PrefixLines(0, host::OutputStream::kStderr, "x"),
            "[0]<stderr>:x\n");
  EXPECT_EQ(PrefixLines(1, host::OutputStream::kStdout, "\n"),
            "[1]<stdout>:\n");
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(OutputSink, ConcurrentRanksNeverInterleaveInsideALine) {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/sink";
  std::string term = dir + ".term";
  int fd = open(term.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  {
    OutputSink sink(fd, fd, dir);
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r) {
      threads.emplace_back([&sink, r] {
        std::string line(1000, static_cast<char>('a' + r));
        line += '\n';
        for (int i = 0; i < 200; ++i) {
          ASSERT_TRUE(
              sink.Write(r, host::OutputStream::kStdout, line + line).ok());
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  close(fd);
  std::istringstream in(Slurp(term));
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    ASSERT_EQ(line.size(), 1000u + 12);
    char c = line[12];
    int rank = c - 'a';
    EXPECT_EQ(line.substr(0, 12), "[" + std::to_string(rank) + "]<stdout>:");
    EXPECT_EQ(line.find_first_not_of(c, 12), std::string::npos);
  }
  EXPECT_EQ(lines, 4 * 200 * 2);
  // Per-rank files hold the raw lines, no prefix.
  std::string r2 = Slurp(dir + "/rank.2/stdout");
  EXPECT_EQ(r2.size(), 200u * 2 * 1001);
  EXPECT_EQ(r2.substr(0, 3), "ccc");
}

TEST(OutputSink, PrefixesTheLocalTimeAsHorovodrunDoesWhenGivenAClock) {
  setenv("TZ", "UTC", 1);
  host::FakeOs clock(absl::FromCivil(absl::CivilSecond(2026, 11, 5, 6, 10, 0),
                                     absl::UTCTimeZone()));
  std::string term = std::string(getenv("TEST_TMPDIR")) + "/stamped";
  int fd = open(term.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  {
    OutputSink sink(fd, fd, "", &clock);
    ASSERT_TRUE(sink.Write(1, host::OutputStream::kStdout, "a\nb\n").ok());
  }
  close(fd);
  EXPECT_EQ(Slurp(term),
            "Thu Nov  5 06:10:00 2026[1]<stdout>:a\n"
            "Thu Nov  5 06:10:00 2026[1]<stdout>:b\n");
}

TEST(OutputSink, UnwritableDirectoryIsNamed) {
  OutputSink sink(-1, -1, "/proc/hvd-cannot-write-here");
  absl::Status s = sink.Write(0, host::OutputStream::kStderr, "x\n");
  EXPECT_THAT(s.message(), ::testing::HasSubstr(
                               "/proc/hvd-cannot-write-here/rank.0/stderr"));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
