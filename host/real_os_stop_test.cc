// RealOs::IsStopped on tracer stops: a debugger's stop counts, and the
// moment a process's own forked tracer holds it (LeakSanitizer's leak check
// at exit does this) does not.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "host/process.h"

namespace hvd::host {
namespace {

// Polls /proc until `pid` is in state 't' (10 s at most).
bool WaitForTracerStop(pid_t pid) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    FILE* f = fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    char state = 0;
    if (f != nullptr) {
      fscanf(f, "%*d (%*[^)]) %c", &state);
      fclose(f);
    }
    if (state == 't') return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(IsStopped, AProcessHeldByATracerItForkedItselfIsNotStopped) {
  // The tracer's pid and its "attached" come on pipes of their own: the two
  // writers race, so one pipe could deliver them in either order.
  int pipefd[2], attachedfd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  ASSERT_EQ(pipe(attachedfd), 0);
  const pid_t p = fork();
  if (p == 0) {
    const pid_t self = getpid();
    const pid_t tracer = fork();
    if (tracer == 0) {  // attaches to its parent, as LSan's tracer does
      if (ptrace(PTRACE_ATTACH, self, nullptr, nullptr) != 0) _exit(1);
      (void)write(attachedfd[1], "x", 1);
      pause();
      _exit(0);
    }
    (void)write(pipefd[1], &tracer, sizeof(tracer));
    for (;;) pause();
  }
  pid_t tracer = 0;
  ASSERT_EQ(read(pipefd[0], &tracer, sizeof(tracer)),
            static_cast<ssize_t>(sizeof(tracer)));
  char attached;
  ASSERT_EQ(read(attachedfd[0], &attached, 1), 1);
  ASSERT_TRUE(WaitForTracerStop(p));
  EXPECT_FALSE(RealOs()->IsStopped(p));
  kill(tracer, SIGKILL);
  kill(p, SIGKILL);
  waitpid(p, nullptr, 0);
}

TEST(IsStopped, AProcessHeldByADebuggerIsStopped) {
  const pid_t q = fork();
  if (q == 0) {
    for (;;) pause();
  }
  ASSERT_EQ(ptrace(PTRACE_ATTACH, q, nullptr, nullptr), 0);  // as gdb -p
  ASSERT_TRUE(WaitForTracerStop(q));
  EXPECT_TRUE(RealOs()->IsStopped(q));
  kill(q, SIGKILL);
  waitpid(q, nullptr, 0);
}

}  // namespace
}  // namespace hvd::host
