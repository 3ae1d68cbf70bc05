// The OS seam of the launcher and the agent (DESIGN.md §7.3): starting
// processes and reading the clock go through `Os`, so tests can inject faults
// (a spawn that fails, a host that never answers) without touching the code
// that decides what to do about them.
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
  Stdio stdin_mode = Stdio::kNull;
  Stdio stdout_mode = Stdio::kInherit;
  Stdio stderr_mode = Stdio::kInherit;
};

// A started child. Owns the parent's ends of its pipes (closed on
// destruction). Not thread-safe except Signal(), which may race with Wait().
class Process {
 public:
  Process(pid_t pid, bool group_leader, int stdin_fd, int stdout_fd,
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
  pid_t pid_;
  bool group_leader_;
  bool reaped_ = false;
  int stdin_fd_, stdout_fd_, stderr_fd_;
};

// The seam. Thread-safe.
class Os {
 public:
  virtual ~Os() = default;
  virtual absl::StatusOr<std::unique_ptr<Process>> Spawn(
      const SpawnOptions& options) = 0;
  virtual absl::Time Now() = 0;
};

// fork/exec and the real clock. Spawn reports a failed exec or chdir as an
// error naming the program and the errno text (it crosses from the child on
// a close-on-exec pipe).
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

// Sends `sig` to process group `pgid`, waits up to `grace` for it to empty,
// then SIGKILLs what is left and waits up to `kill_wait` more. True if the
// group is gone at the end.
bool TerminateGroup(pid_t pgid, int sig, absl::Duration grace,
                    absl::Duration kill_wait = absl::Seconds(2));
// Whether any process of group `pgid` still exists.
bool GroupExists(pid_t pgid);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_PROCESS_H_
