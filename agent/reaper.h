// The reaper: a helper process hvd-agent forks first thing (before any thread
// exists), so that even an agent killed with SIGKILL leaves no worker behind.
//
// The agent tells it, over a pipe, the process group of every worker it
// starts. When that pipe closes, whichever way the agent ended, the reaper
// sends SIGTERM to every group still tracked, SIGKILL after the grace period
// to what is left, and exits. Workers' own PR_SET_PDEATHSIG covers the
// workers themselves; the reaper covers what they started (a shell's
// children, data-loader processes) in their group.
#ifndef HVD_AGENT_REAPER_H_
#define HVD_AGENT_REAPER_H_

#include <sys/types.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "host/process.h"

namespace hvd {
namespace agent {

// Thread-safe.
class Reaper {
 public:
  // Forks the reaper process (its comm is "hvd-reaper"), which signals and
  // watches the groups through `os` (it must stay valid in a forked child:
  // RealOs() does). Call while the process has a single thread.
  static absl::StatusOr<std::unique_ptr<Reaper>> Start(host::Os* os,
                                                       absl::Duration grace);
  // Closes the pipe (the reaper then ends what is still tracked) and waits
  // for the reaper to exit.
  ~Reaper();
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  void Track(pid_t pgid);
  void Untrack(pid_t pgid);
  pid_t pid() const { return pid_; }

 private:
  Reaper(host::Os* os, int fd, pid_t pid) : os_(os), fd_(fd), pid_(pid) {}
  void Send(char op, pid_t pgid);
  host::Os* const os_;
  absl::Mutex mu_;
  int fd_;
  pid_t pid_;
};

}  // namespace agent
}  // namespace hvd

#endif  // HVD_AGENT_REAPER_H_
