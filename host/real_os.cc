// The real OS behind the seam: fork/exec, waitpid, kill, /proc and the
// system clock.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "host/cpu_binding.h"
#include "host/process.h"

namespace hvd {
namespace host {
namespace {

// What the child reports on the close-on-exec error pipe: which step failed
// and its errno. Plain data, written with one write(2).
struct ChildError {
  int step;  // 0 chdir, 1 exec, 2 dup2/setup, 3 CPU affinity
  int err;
};

// Runs in the forked child of a possibly multi-threaded parent: only
// async-signal-safe calls until execve.
[[noreturn]] void ChildExec(const SpawnOptions& o, const char* program,
                            char* const* argv, char* const* envp,
                            const int stdio[3], const cpu_set_t* cpus,
                            int err_fd) {
  if (o.new_process_group) setpgid(0, 0);
  if (cpus != nullptr && sched_setaffinity(0, sizeof(*cpus), cpus) != 0) {
    ChildError e{3, errno};
    (void)!write(err_fd, &e, sizeof(e));
    _exit(127);
  }
  if (o.parent_death_signal != 0) {
    prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
  }
  // Signals blocked or ignored by the parent's threads must not leak in.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  }
  for (int i = 0; i < 3; ++i) {
    if (stdio[i] >= 0 && stdio[i] != i) {
      if (dup2(stdio[i], i) < 0) {
        ChildError e{2, errno};
        (void)!write(err_fd, &e, sizeof(e));
        _exit(127);
      }
    }
  }
  if (!o.cwd.empty() && chdir(o.cwd.c_str()) < 0) {
    ChildError e{0, errno};
    (void)!write(err_fd, &e, sizeof(e));
    _exit(127);
  }
  execve(program, argv, envp);
  ChildError e{1, errno};
  (void)!write(err_fd, &e, sizeof(e));
  _exit(127);
}

// Whether a live member of group `pgid` exists.
// State, parent and group of process `pid` from /proc/<pid>/stat; false if
// it cannot be read (gone).
bool ReadProcStat(const char* pid, char* state, long* pgrp,
                  long* parent = nullptr) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return false;
  // pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
  size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return false;
  std::istringstream rest(line.substr(close_paren + 1));
  long ppid;
  if (!(rest >> *state >> ppid >> *pgrp)) return false;
  if (parent != nullptr) *parent = ppid;
  return true;
}

// The TracerPid of /proc/<pid>/status; 0 when none or unreadable.
long TracerOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    absl::string_view rest = line;
    long tracer = 0;
    if (absl::ConsumePrefix(&rest, "TracerPid:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &tracer)) {
      return tracer;
    }
  }
  return 0;
}

bool ProcGroupExists(pid_t pgid) {
  // kill(-pgid, 0) also counts zombies, which a container's init may never
  // reap; /proc tells a live member from a dead one.
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return killpg(pgid, 0) == 0;
  bool found = false;
  while (struct dirent* ent = readdir(dir)) {
    if (ent->d_name[0] < '0' || ent->d_name[0] > '9') continue;
    char state;
    long pgrp;
    if (!ReadProcStat(ent->d_name, &state, &pgrp)) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

bool ProcStopped(pid_t pid) {
  char state;
  long pgrp;
  // T: stopped by a signal; t: stopped by a tracer (a debugger).
  if (!ReadProcStat(absl::StrCat(pid).c_str(), &state, &pgrp)) return false;
  if (state != 't') return state == 'T';
  // A tracer the process forked itself is a sanitizer's leak check at exit
  // holding it for a moment (LeakSanitizer's stop-the-world), not a stop.
  const long tracer = TracerOf(pid);
  char tracer_state;
  long tracer_pgrp, tracer_parent = 0;
  return !(tracer > 0 &&
           ReadProcStat(absl::StrCat(tracer).c_str(), &tracer_state,
                        &tracer_pgrp, &tracer_parent) &&
           tracer_parent == pid);
}

absl::StatusOr<ExitStatus> WaitPid(pid_t pid, int flags) {
  int status = 0;
  pid_t r;
  while ((r = waitpid(pid, &status, flags)) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid(", pid, "): ", strerror(errno)));
    }
  }
  if (r == 0) return absl::NotFoundError("still running");
  return ExitStatus::FromWaitStatus(status);
}

absl::Status KillStatus(int r, pid_t target, int sig) {
  if (r < 0 && errno != ESRCH) {
    return absl::InternalError(
        absl::StrCat("kill(", target, ", ", sig, "): ", strerror(errno)));
  }
  return absl::OkStatus();
}

class RealOsImpl : public Os {
 public:
  absl::StatusOr<std::unique_ptr<Process>> Spawn(
      const SpawnOptions& o) override;
  absl::StatusOr<ExitStatus> WaitChild(pid_t pid) override {
    return WaitPid(pid, 0);
  }
  absl::StatusOr<ExitStatus> TryWaitChild(pid_t pid) override {
    return WaitPid(pid, WNOHANG);
  }
  absl::Status Signal(pid_t pid, int sig) override {
    return KillStatus(kill(pid, sig), pid, sig);
  }
  absl::Status SignalGroup(pid_t pgid, int sig) override {
    return KillStatus(killpg(pgid, sig), pgid, sig);
  }
  bool GroupExists(pid_t pgid) override { return ProcGroupExists(pgid); }
  bool IsStopped(pid_t pid) override { return ProcStopped(pid); }
  pid_t ProcessId() override { return getpid(); }
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

// A null-terminated array of pointers into `strings`, for execve.
std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

// The descriptors of a child's standard streams while it is being spawned:
// the child's ends (what becomes its 0, 1 and 2; -1 to inherit) and the
// parent's ends of the pipes. Closes whatever it still holds when destroyed.
class StdioFds {
 public:
  StdioFds() = default;
  ~StdioFds() {
    CloseChildEnds();
    for (int fd : parent_) {
      if (fd >= 0) close(fd);
    }
  }
  StdioFds(const StdioFds&) = delete;
  StdioFds& operator=(const StdioFds&) = delete;

  // A pipe for each stream `o` pipes, /dev/null for each it nulls.
  absl::Status Open(const SpawnOptions& o) {
    const Stdio modes[3] = {o.stdin_mode, o.stdout_mode, o.stderr_mode};
    for (int i = 0; i < 3; ++i) {
      if (modes[i] == Stdio::kPipe) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
          return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
        }
        // stdin: the child reads; stdout and stderr: the child writes.
        child_[i] = i == 0 ? p[0] : p[1];
        parent_[i] = i == 0 ? p[1] : p[0];
      } else if (modes[i] == Stdio::kNull) {
        if (null_fd_ < 0) null_fd_ = open("/dev/null", O_RDWR | O_CLOEXEC);
        child_[i] = null_fd_;
      }
    }
    return absl::OkStatus();
  }
  const int* child() const { return child_; }
  // In the parent once the child is forked: its ends are the child's now.
  void CloseChildEnds() {
    for (int& fd : child_) {
      if (fd >= 0 && fd != null_fd_) close(fd);
      fd = -1;
    }
    if (null_fd_ >= 0) close(null_fd_);
    null_fd_ = -1;
  }
  // Hands the parent's ends over to the caller.
  std::array<int, 3> TakeParentEnds() {
    std::array<int, 3> out = {parent_[0], parent_[1], parent_[2]};
    parent_[0] = parent_[1] = parent_[2] = -1;
    return out;
  }

 private:
  int child_[3] = {-1, -1, -1};
  int parent_[3] = {-1, -1, -1};
  int null_fd_ = -1;
};

// Waits on `err_fd` (closing it) for the child `pid` to exec: OK when it
// did (the close-on-exec pipe closed), else reaps the child and says which
// step failed, naming the directory or the program.
absl::Status AwaitExec(pid_t pid, int err_fd, const SpawnOptions& o,
                       const std::string& program) {
  ChildError ce;
  ssize_t n;
  do {
    n = read(err_fd, &ce, sizeof(ce));
  } while (n < 0 && errno == EINTR);
  close(err_fd);
  if (n != sizeof(ce)) return absl::OkStatus();
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (ce.step == 3) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot bind '", program, "' to CPUs ",
                     CpuListString(o.cpus), ": ", strerror(ce.err)));
  }
  const char* what =
      ce.step == 0 ? "cannot change directory to '" : "cannot run '";
  const std::string& target = ce.step == 0 ? o.cwd : program;
  return absl::FailedPreconditionError(
      absl::StrCat(what, target, "': ", strerror(ce.err)));
}

absl::StatusOr<std::unique_ptr<Process>> RealOsImpl::Spawn(
    const SpawnOptions& o) {
  if (o.argv.empty()) return absl::InvalidArgumentError("empty command");
  absl::StatusOr<std::string> program =
      FindProgram(o.argv[0], EnvValue(o.env, "PATH"));
  if (!program.ok()) return program.status();

  // Everything the child needs is prepared before fork.
  std::vector<char*> argv = CStrings(o.argv);
  std::vector<char*> envp = CStrings(o.env);
  absl::StatusOr<cpu_set_t> cpus = CpuSetOf(o.cpus);
  if (!cpus.ok()) return cpus.status();
  StdioFds stdio;
  if (absl::Status s = stdio.Open(o); !s.ok()) return s;
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) < 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }

  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(err_pipe[0]);
    close(err_pipe[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(e)));
  }
  if (pid == 0) {
    ChildExec(o, program->c_str(), argv.data(), envp.data(), stdio.child(),
              o.cpus.empty() ? nullptr : &*cpus, err_pipe[1]);
  }
  // Parent. Set the group here too: whichever of parent and child runs first,
  // the group exists before anyone signals it.
  if (o.new_process_group) setpgid(pid, pid);
  close(err_pipe[1]);
  stdio.CloseChildEnds();
  if (absl::Status s = AwaitExec(pid, err_pipe[0], o, *program); !s.ok()) {
    return s;
  }
  const std::array<int, 3> fds = stdio.TakeParentEnds();
  return std::make_unique<Process>(this, pid, o.new_process_group, fds[0],
                                   fds[1], fds[2]);
}

}  // namespace

Os* RealOs() {
  static Os* os = new RealOsImpl();
  return os;
}

}  // namespace host
}  // namespace hvd
