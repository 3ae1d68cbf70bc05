// The OS seam of the launcher and the agent: starting, waiting for and
// signalling processes, asking whether a process group still exists, reading
// the clock and sleeping all go through `Os`, so tests can replace the OS
// (host/fake_os.h) and inject faults (a spawn that fails, a worker that
// ignores SIGTERM, a launcher silent for minutes) without real processes or
// real waiting, and without touching the code that decides what to do about
// them.
#ifndef HVD_HOST_PROCESS_H_
#define HVD_HOST_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hvd {
namespace host {

// How a process ended.
struct ExitStatus {
  int code = 0;    // exit code when signal == 0
  int signal = 0;  // the terminating signal, 0 if it exited normally

  bool ok() const { return signal == 0 && code == 0; }
  // The shell's convention: code, or 128 + signal.
  int ShellCode() const { return signal != 0 ? 128 + signal : code; }
  // "exited with code 3" / "killed by signal 9".
  std::string ToString() const;
  static ExitStatus FromWaitStatus(int wait_status);
};

enum class Stdio { kInherit, kPipe, kNull };

struct SpawnOptions {
  // argv[0] without a '/' is looked up in the PATH of `env` (not of this
  // process), so a worker finds its program where its own environment says.
  std::vector<std::string> argv;
  // "NAME=VALUE" entries: the child's whole environment.
  std::vector<std::string> env;
  std::string cwd;  // empty: inherit
  // The child leads a new process group, so one killpg reaches everything it
  // starts and a terminal's Ctrl-C does not.
  bool new_process_group = true;
  // Delivered to the child when the spawning *thread* exits (prctl semantics):
  // spawn from a thread that lives as long as the child should. 0: none.
  int parent_death_signal = 0;
  // Non-empty: the child runs on these CPUs only (its affinity, set before
  // exec; host/cpu_binding.h says which).
  std::vector<int> cpus;
  Stdio stdin_mode = Stdio::kNull;
  Stdio stdout_mode = Stdio::kInherit;
  Stdio stderr_mode = Stdio::kInherit;
};

class Os;

// A started child. Owns the parent's ends of its pipes (closed on
// destruction). Waiting and signalling go through the Os that spawned it,
// which must outlive it. Not thread-safe except Signal(), which may race with
// Wait().
class Process {
 public:
  Process(Os* os, pid_t pid, bool group_leader, int stdin_fd, int stdout_fd,
          int stderr_fd);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Parent ends of the pipes; -1 when that stream is not a pipe. Take* hands
  // the descriptor over to the caller (who must close it).
  int stdin_fd() const { return stdin_fd_; }
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  int TakeStdin();
  int TakeStdout();
  int TakeStderr();

  // Blocks until the child ends, then reaps it. Call at most once.
  absl::StatusOr<ExitStatus> Wait();
  // Non-blocking: the status if it has ended (reaped), nullopt-like
  // NotFound while it runs.
  absl::StatusOr<ExitStatus> TryWait();
  // Sends `sig` to the child's process group if it leads one, else to the
  // child. OK if it is already gone.
  absl::Status Signal(int sig);

 private:
  Os* const os_;
  pid_t pid_;
  bool group_leader_;
  bool reaped_ = false;
  int stdin_fd_, stdout_fd_, stderr_fd_;
};

// The seam. Thread-safe.
class Os {
 public:
  virtual ~Os() = default;

  // Starts a child as `options` say; the error says why it could not.
  virtual absl::StatusOr<std::unique_ptr<Process>> Spawn(
      const SpawnOptions& options) = 0;
  // Blocks until the child `pid` ends, then reaps it.
  virtual absl::StatusOr<ExitStatus> WaitChild(pid_t pid) = 0;
  // Reaps the child `pid` if it has ended; NotFound while it runs.
  virtual absl::StatusOr<ExitStatus> TryWaitChild(pid_t pid) = 0;
  // Sends `sig` to process `pid`, or to every process of group `pgid`. OK if
  // it is already gone; Internal naming the target and the errno otherwise.
  virtual absl::Status Signal(pid_t pid, int sig) = 0;
  virtual absl::Status SignalGroup(pid_t pgid, int sig) = 0;
  // Whether a live process of group `pgid` exists (a zombie is not live).
  virtual bool GroupExists(pid_t pgid) = 0;
  // Whether process `pid` is stopped: by SIGSTOP, SIGTSTP, SIGTTIN or
  // SIGTTOU, or by a debugger. False when it runs or is gone.
  virtual bool IsStopped(pid_t pid) = 0;
  // This process's id.
  virtual pid_t ProcessId() = 0;

  virtual absl::Time Now() = 0;
  // Returns after `d` by Now()'s clock.
  virtual void SleepFor(absl::Duration d) = 0;
};

// The real OS: fork/exec, waitpid, kill, /proc and the system clock. Spawn
// reports a failed exec or chdir as an error naming the program and the
// errno text (it crosses from the child on a close-on-exec pipe).
Os* RealOs();

// `program` found in the colon-separated `path` (as execvp would), or
// NotFound naming the program.
absl::StatusOr<std::string> FindProgram(absl::string_view program,
                                        absl::string_view path);

// Environment helpers: "NAME=VALUE" list of this process, and a lookup.
std::vector<std::string> CurrentEnvironment();
std::string EnvValue(const std::vector<std::string>& env,
                     absl::string_view name);

// Writes all of `data` (retrying short writes and EINTR).
absl::Status WriteAll(int fd, absl::string_view data);

// Reads `fd` until end of file or an error (EINTR is retried), calling
// `on_line` with each '\n'-terminated line, without its '\n', as it
// completes. Returns what followed the last '\n' (empty if the stream ended
// on one). Blocks; does not close `fd`. Allocates: not for a child between
// fork and exec of a multi-threaded parent.
std::string ReadLines(int fd,
                      absl::FunctionRef<void(absl::string_view)> on_line);

// Through `os`: sends `sig` to each process group of `pgids`, waits up to
// `grace` for them all to empty, and if any is left SIGKILLs every one and
// waits up to `kill_wait` more. True if every group is gone at the end. Groups 0 and 1
// (this process's own, init's) are never signalled.
bool TerminateGroups(Os* os, const std::vector<pid_t>& pgids, int sig,
                     absl::Duration grace, absl::Duration kill_wait);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_PROCESS_H_
