// A test double of the OS seam (host/process.h): a clock that moves only when
// the test moves it or the code under test sleeps on it, and processes that
// are records in memory. Nothing real is started, signalled or waited for, so
// tests of timeouts and escalations take no real time and run the same way
// every time.
#ifndef HVD_HOST_FAKE_OS_H_
#define HVD_HOST_FAKE_OS_H_

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "host/process.h"

namespace hvd {
namespace host {

// Thread-safe. Must outlive every Process it spawned.
class FakeOs : public Os {
 public:
  // A signal the code under test sent, and when by the fake clock.
  struct SentSignal {
    absl::Time at;
    pid_t target;
    bool group;  // SignalGroup (else Signal)
    int sig;
    bool operator==(const SentSignal&) const = default;
  };
  // The process id ProcessId() answers, and the group of fake processes that
  // do not lead one of their own.
  static constexpr pid_t kProcessId = 4242;

  explicit FakeOs(absl::Time start = absl::FromUnixSeconds(1000000));
  // Ends the fake processes still running (closing their pipes).
  ~FakeOs() override;
  FakeOs(const FakeOs&) = delete;
  FakeOs& operator=(const FakeOs&) = delete;

  // A fake process: a fresh pid above the kernel's largest (so a real kill()
  // that gets hold of one reaches nothing), leading its own group when
  // `options` say so, and a real pipe for each stream `options` pipe, whose
  // child end this holds until the process ends. Fails, starting nothing,
  // after FailSpawns.
  absl::StatusOr<std::unique_ptr<Process>> Spawn(
      const SpawnOptions& options) override;
  // Block (in real time) until the fake process ends.
  absl::StatusOr<ExitStatus> WaitChild(pid_t pid) override;
  absl::StatusOr<ExitStatus> TryWaitChild(pid_t pid) override;
  // Recorded (signals()). SIGSTOP and SIGCONT stop and continue the fake
  // processes they reach; every other signal but 0 and those IgnoreSignal
  // names ends them.
  absl::Status Signal(pid_t pid, int sig) override;
  absl::Status SignalGroup(pid_t pgid, int sig) override;
  // Whether a fake process of group `pgid` is running.
  bool GroupExists(pid_t pgid) override;
  // Whether fake process `pid` runs and was stopped by SIGSTOP.
  bool IsStopped(pid_t pid) override;
  pid_t ProcessId() override { return kProcessId; }
  absl::Time Now() override;
  // Advances the clock by `d` and returns at once.
  void SleepFor(absl::Duration d) override;

  // What the test does.
  void Advance(absl::Duration d);
  // Every later Spawn fails with `error`.
  void FailSpawns(absl::Status error);
  // Fake processes survive `sig` from now on (as if they trapped it).
  void IgnoreSignal(int sig);
  // Every signal sent so far, in order.
  std::vector<SentSignal> signals() const;
  // Blocks, in real time up to `timeout`, until at least `n` signals have
  // been sent; false if they were not.
  bool AwaitSignals(size_t n, absl::Duration timeout);

 private:
  struct FakeProcess {
    pid_t pgid = 0;
    std::optional<ExitStatus> ended;
    bool reaped = false;
    bool stopped = false;  // by SIGSTOP, until SIGCONT
    std::vector<int> child_fds;  // the child's ends of its pipes
  };
  // WaitChild (`block`) and TryWaitChild.
  absl::StatusOr<ExitStatus> Reap(pid_t pid, bool block);
  absl::Status Deliver(pid_t target, bool group, int sig);
  static void End(FakeProcess* p, ExitStatus status);

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  pid_t next_pid_ ABSL_GUARDED_BY(mu_) = 1 << 30;
  std::map<pid_t, FakeProcess> processes_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> spawn_error_ ABSL_GUARDED_BY(mu_);
  std::set<int> ignored_ ABSL_GUARDED_BY(mu_);
  std::vector<SentSignal> signals_ ABSL_GUARDED_BY(mu_);
};

// "SIGTERM to group 1073741824 at <time>", for test failure messages.
std::ostream& operator<<(std::ostream& os, const FakeOs::SentSignal& s);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_FAKE_OS_H_
