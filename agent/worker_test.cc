#include "agent/worker.h"

#include <signal.h>

#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace agent {
namespace {

using host::OutputStream;

struct Recorder {
  absl::Mutex mu;
  std::string out, err;
  std::vector<std::string> events;  // "out", "err", "exit"
  host::ExitStatus status;
  absl::Notification done;

  WorkerCallbacks Callbacks() {
    WorkerCallbacks cb;
    cb.output = [this](int, OutputStream s, std::string lines) {
      absl::MutexLock l(&mu);
      (s == OutputStream::kStdout ? out : err) += lines;
      events.push_back(s == OutputStream::kStdout ? "out" : "err");
    };
    cb.exited = [this](int, host::ExitStatus s) {
      {
        absl::MutexLock l(&mu);
        status = s;
        events.push_back("exit");
      }
      done.Notify();
    };
    return cb;
  }
};

host::SpawnOptions Shell(const std::string& script) {
  host::SpawnOptions o;
  o.argv = {"sh", "-c", script};
  o.env = {"PATH=/usr/bin:/bin"};
  return o;
}

TEST(Worker, OutputBeforeExitAndPartialLastLineKept) {
  Recorder r;
  auto w = Worker::Start(
      host::RealOs(), 0,
      Shell("echo one; echo two >&2; printf partial; exit 4"), r.Callbacks());
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(r.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock l(&r.mu);
  EXPECT_EQ(r.out, "one\npartial\n");
  EXPECT_EQ(r.err, "two\n");
  EXPECT_EQ(r.status.code, 4);
  EXPECT_EQ(r.events.back(), "exit");
}

TEST(Worker, OutputOfAKilledWorkerIsNotLost) {
  Recorder r;
  auto w = Worker::Start(host::RealOs(), 1,
                         Shell("echo before; printf 'half'; kill -9 $$"),
                         r.Callbacks());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(r.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock l(&r.mu);
  EXPECT_EQ(r.out, "before\nhalf\n");
  EXPECT_EQ(r.status.signal, SIGKILL);
}

TEST(Worker, StartFailureIsAnError) {
  Recorder r;
  host::SpawnOptions o;
  o.argv = {"/nonexistent/train"};
  auto w = Worker::Start(host::RealOs(), 0, o, r.Callbacks());
  EXPECT_THAT(w.status().message(),
              ::testing::HasSubstr("cannot run '/nonexistent/train'"));
}

TEST(Worker, SignalReachesTheWholeGroup) {
  Recorder r;
  auto w = Worker::Start(host::RealOs(), 0, Shell("sleep 30 & sleep 30; wait"),
                         r.Callbacks());
  ASSERT_TRUE(w.ok());
  absl::SleepFor(absl::Milliseconds(100));
  (*w)->Signal(SIGTERM);
  ASSERT_TRUE(r.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // The shell is reaped first; its background child, signalled too, may
  // still be on its way out on a loaded machine.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (host::RealOs()->GroupExists((*w)->pid()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(host::RealOs()->GroupExists((*w)->pid()));
}

}  // namespace
}  // namespace agent
}  // namespace hvd
