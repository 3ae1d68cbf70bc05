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
  // The tracer alone writes to the pipe: its pid, then whether its attach
  // worked. (Were the traced process to write anything, the attach could
  // stop it before it had, on a slow machine.) Only the tracer keeps a
  // write end, so a tracer that dies early gives end-of-file, not a hang.
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t p = fork();
  if (p == 0) {
    const pid_t self = getpid();
    const pid_t tracer = fork();
    if (tracer == 0) {  // attaches to its parent, as LSan's tracer does
      const pid_t me = getpid();
      (void)write(pipefd[1], &me, sizeof(me));
      const char attached =
          ptrace(PTRACE_ATTACH, self, nullptr, nullptr) == 0 ? 'x' : 'e';
      (void)write(pipefd[1], &attached, 1);
      pause();
      _exit(0);
    }
    close(pipefd[1]);
    for (;;) pause();
  }
  close(pipefd[1]);
  pid_t tracer = 0;
  char attached = 0;
  const bool told = read(pipefd[0], &tracer, sizeof(tracer)) ==
                        static_cast<ssize_t>(sizeof(tracer)) &&
                    read(pipefd[0], &attached, 1) == 1;
  close(pipefd[0]);
  bool held = false, stopped = true;
  if (told && attached == 'x') {
    held = WaitForTracerStop(p);
    stopped = RealOs()->IsStopped(p);
  }
  if (tracer > 0) kill(tracer, SIGKILL);
  kill(p, SIGKILL);
  waitpid(p, nullptr, 0);
  ASSERT_TRUE(told) << "the tracer ended before it reported";
  ASSERT_EQ(attached, 'x') << "the tracer could not attach to its parent";
  ASSERT_TRUE(held) << "the process never showed the tracer's stop";
  EXPECT_FALSE(stopped);
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
