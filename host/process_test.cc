#include "host/process.h"

#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/cpu_binding.h"
#include "host/fake_os.h"

namespace hvd {
namespace host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using SentSignal = FakeOs::SentSignal;

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"sh", "-c", script};
  o.env = {"PATH=/usr/bin:/bin"};
  o.stdout_mode = Stdio::kPipe;
  return o;
}

TEST(Spawn, RunsWithGivenEnvironmentAndDirectory) {
  SpawnOptions o = Shell("echo $FOO; pwd");
  o.env.push_back("FOO=bar");
  o.cwd = "/tmp";
  auto p = RealOs()->Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(ReadAll((*p)->stdout_fd()), "bar\n/tmp\n");
  auto s = (*p)->Wait();
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->ok());
}

TEST(Spawn, ReportsExitCodeAndSignal) {
  auto p = RealOs()->Spawn(Shell("exit 3"));
  ASSERT_TRUE(p.ok());
  auto s = (*p)->Wait();
  EXPECT_EQ(s->code, 3);
  EXPECT_EQ(s->ShellCode(), 3);
  EXPECT_EQ(s->ToString(), "exited with code 3");
  auto q = RealOs()->Spawn(Shell("kill -9 $$"));
  ASSERT_TRUE(q.ok());
  auto t = (*q)->Wait();
  EXPECT_EQ(t->signal, 9);
  EXPECT_EQ(t->ShellCode(), 137);
  EXPECT_THAT(t->ToString(), HasSubstr("killed by signal 9"));
}

TEST(Spawn, MissingProgramIsAnErrorNotAChild) {
  SpawnOptions o;
  o.argv = {"no-such-program-hvd"};
  o.env = {"PATH=/usr/bin:/bin"};
  auto p = RealOs()->Spawn(o);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("'no-such-program-hvd'"));
}

TEST(Spawn, UnusableDirectoryNamesIt) {
  SpawnOptions o = Shell("true");
  o.cwd = "/nonexistent-dir-hvd";
  auto p = RealOs()->Spawn(o);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(p.status().message(),
              HasSubstr("cannot change directory to '/nonexistent-dir-hvd'"));
}

TEST(Spawn, NonExecutableFileNamesIt) {
  SpawnOptions o;
  o.argv = {"/etc/hostname"};
  auto p = RealOs()->Spawn(o);
  EXPECT_THAT(p.status().message(), HasSubstr("cannot run '/etc/hostname'"));
}

TEST(Spawn, RunsOnlyOnTheCpusItIsGiven) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  SpawnOptions o = Shell("grep Cpus_allowed_list /proc/self/status");
  o.cpus = {allowed.back()};
  auto p = RealOs()->Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(ReadAll((*p)->stdout_fd()),
            "Cpus_allowed_list:\t" + std::to_string(allowed.back()) + "\n");
  EXPECT_TRUE((*p)->Wait()->ok());
}

TEST(Spawn, CpusItMayNotUseAreAnErrorNamingThem) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  SpawnOptions o = Shell("true");
  o.cpus = {allowed.back() + 1};  // not this process's to give
  auto p = RealOs()->Spawn(o);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(p.status().message(),
              HasSubstr("to CPUs " + std::to_string(allowed.back() + 1) +
                        ": Invalid argument"));
  o.cpus = {-1};
  EXPECT_EQ(RealOs()->Spawn(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Spawn, ChildLeadsItsOwnProcessGroup) {
  auto p = RealOs()->Spawn(Shell("ps -o pgid= -p $$"));
  ASSERT_TRUE(p.ok());
  std::string out = ReadAll((*p)->stdout_fd());
  EXPECT_EQ(std::stoi(out), (*p)->pid());
  (*p)->Wait().IgnoreError();
}

TEST(Spawn, UnblocksSignalsBlockedInParent) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  auto p = RealOs()->Spawn(Shell("sleep 30"));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Signal(SIGTERM).ok());
  auto s = (*p)->Wait();
  EXPECT_EQ(s->signal, SIGTERM);
}

TEST(TerminateGroups, KillsGrandchildrenAndEscalatesToSigkill) {
  // The shell ignores SIGTERM and leaves a background grandchild behind.
  auto p = RealOs()->Spawn(Shell("trap '' TERM; sleep 30 & echo ready; wait"));
  ASSERT_TRUE(p.ok());
  char c;
  ASSERT_EQ(read((*p)->stdout_fd(), &c, 1), 1);
  pid_t pgid = (*p)->pid();
  EXPECT_TRUE(RealOs()->GroupExists(pgid));
  EXPECT_TRUE(TerminateGroups(RealOs(), {pgid}, SIGTERM,
                              absl::Milliseconds(200), absl::Seconds(2)));
  auto s = (*p)->Wait();
  EXPECT_EQ(s->signal, SIGKILL);
  EXPECT_FALSE(RealOs()->GroupExists(pgid));
}

// The same policy by the fake clock: what is sent to whom, and when.
class TerminateGroupsByTheClock : public ::testing::Test {
 protected:
  pid_t StartGroup() {
    SpawnOptions o;
    o.argv = {"train"};
    absl::StatusOr<std::unique_ptr<Process>> p = os_.Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status();
    processes_.push_back(*std::move(p));
    return processes_.back()->pid();
  }

  FakeOs os_;
  const absl::Time t0_ = os_.Now();
  std::vector<std::unique_ptr<Process>> processes_;
};

TEST_F(TerminateGroupsByTheClock, GroupsThatEndOnTheSignalGetNothingMore) {
  const pid_t a = StartGroup(), b = StartGroup();
  EXPECT_TRUE(TerminateGroups(&os_, {a, b}, SIGTERM, absl::Seconds(5),
                              absl::Seconds(2)));
  EXPECT_THAT(os_.signals(), ElementsAre(SentSignal{t0_, a, true, SIGTERM},
                                         SentSignal{t0_, b, true, SIGTERM}));
}

TEST_F(TerminateGroupsByTheClock, SigkillOnceTheGraceHasPassed) {
  os_.IgnoreSignal(SIGTERM);
  const pid_t a = StartGroup();
  EXPECT_TRUE(
      TerminateGroups(&os_, {a}, SIGTERM, absl::Seconds(5), absl::Seconds(2)));
  EXPECT_THAT(os_.signals(), ElementsAre(SentSignal{t0_, a, true, SIGTERM},
                                         SentSignal{t0_ + absl::Seconds(5), a,
                                                    true, SIGKILL}));
  EXPECT_FALSE(os_.GroupExists(a));
}

TEST_F(TerminateGroupsByTheClock, FalseWhenAGroupOutlastsSigkillToo) {
  // As a process in uninterruptible sleep would.
  os_.IgnoreSignal(SIGTERM);
  os_.IgnoreSignal(SIGKILL);
  const pid_t a = StartGroup();
  EXPECT_FALSE(
      TerminateGroups(&os_, {a}, SIGTERM, absl::Seconds(5), absl::Seconds(2)));
  EXPECT_EQ(os_.Now(), t0_ + absl::Seconds(7));
}

TEST_F(TerminateGroupsByTheClock, NeverSignalsItsOwnGroupOrInit) {
  EXPECT_TRUE(TerminateGroups(&os_, {0, 1}, SIGTERM, absl::Seconds(5),
                              absl::Seconds(2)));
  EXPECT_THAT(os_.signals(), IsEmpty());
}

TEST(Spawn, StdinPipeFeedsChild) {
  SpawnOptions o = Shell("read line; echo got:$line");
  o.stdin_mode = Stdio::kPipe;
  auto p = RealOs()->Spawn(o);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(WriteAll((*p)->stdin_fd(), "hello\n").ok());
  close((*p)->TakeStdin());
  EXPECT_EQ(ReadAll((*p)->stdout_fd()), "got:hello\n");
  (*p)->Wait().IgnoreError();
}

TEST(ReadLines, HandsOutWholeLinesAndReturnsTheUnterminatedRest) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  // Lines split across writes, an empty line, and a line longer than one read.
  const std::string long_line(10000, 'x');
  ASSERT_TRUE(WriteAll(p[1], "one\ntw").ok());
  ASSERT_TRUE(WriteAll(p[1], "o\n\n" + long_line + "\nrest").ok());
  close(p[1]);
  std::vector<std::string> lines;
  const std::string rest = ReadLines(
      p[0], [&](absl::string_view line) { lines.emplace_back(line); });
  close(p[0]);
  EXPECT_THAT(lines, ElementsAre("one", "two", "", long_line));
  EXPECT_EQ(rest, "rest");
}

TEST(ReadLines, StreamEndingOnANewlineLeavesNoRest) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_TRUE(WriteAll(p[1], "a\n").ok());
  close(p[1]);
  int calls = 0;
  EXPECT_EQ(ReadLines(p[0], [&](absl::string_view) { ++calls; }), "");
  close(p[0]);
  EXPECT_EQ(calls, 1);
}

TEST(FindProgram, UsesGivenPath) {
  auto p = FindProgram("sh", "/nonexistent:/bin");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "/bin/sh");
  EXPECT_EQ(FindProgram("sh", "/nonexistent").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace host
}  // namespace hvd
