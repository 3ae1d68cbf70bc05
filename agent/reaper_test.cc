#include "agent/reaper.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "host/process.h"

namespace hvd {
namespace agent {
namespace {

// The agent dies with SIGKILL: the reaper must end the workers' groups.
TEST(Reaper, KillsTrackedGroupsWhenTheAgentDiesBySigkill) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    // The "agent": reaper first, then a worker that ignores SIGTERM and a
    // grandchild in its group.
    auto reaper = Reaper::Start(host::RealOs(), absl::Milliseconds(300));
    if (!reaper.ok()) _exit(3);
    host::SpawnOptions o;
    o.argv = {"sh", "-c", "trap '' TERM; sleep 60 & echo $$; wait"};
    o.env = {"PATH=/usr/bin:/bin"};
    o.stdout_mode = host::Stdio::kPipe;
    auto p = host::RealOs()->Spawn(o);
    if (!p.ok()) _exit(4);
    (*reaper)->Track((*p)->pid());
    char buf[32];
    ssize_t n = read((*p)->stdout_fd(), buf, sizeof(buf));
    if (write(ready[1], buf, n) != n) _exit(5);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char buf[32] = {0};
  ASSERT_GT(read(ready[0], buf, sizeof(buf) - 1), 0);
  pid_t worker_group = atoi(buf);
  ASSERT_GT(worker_group, 1);
  EXPECT_TRUE(host::RealOs()->GroupExists(worker_group));
  kill(agent, SIGKILL);
  int status;
  waitpid(agent, &status, 0);
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (host::RealOs()->GroupExists(worker_group) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_FALSE(host::RealOs()->GroupExists(worker_group));
}

TEST(Reaper, UntrackedGroupsAreLeftAlone) {
  auto reaper = Reaper::Start(host::RealOs(), absl::Milliseconds(100));
  ASSERT_TRUE(reaper.ok());
  host::SpawnOptions o;
  o.argv = {"sleep", "30"};
  o.env = {"PATH=/usr/bin:/bin"};
  auto p = host::RealOs()->Spawn(o);
  ASSERT_TRUE(p.ok());
  (*reaper)->Track((*p)->pid());
  (*reaper)->Untrack((*p)->pid());
  reaper->reset();  // the reaper exits
  EXPECT_EQ((*p)->TryWait().status().code(), absl::StatusCode::kNotFound);
  (*p)->Signal(SIGKILL).IgnoreError();
  (*p)->Wait().IgnoreError();
}

}  // namespace
}  // namespace agent
}  // namespace hvd
