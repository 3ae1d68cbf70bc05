#include "host/process.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace hvd {
namespace host {

std::string ExitStatus::ToString() const {
  if (signal != 0) {
    return absl::StrCat("killed by signal ", signal, " (", strsignal(signal),
                        ")");
  }
  return absl::StrCat("exited with code ", code);
}

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus s;
  if (WIFSIGNALED(wait_status)) {
    s.signal = WTERMSIG(wait_status);
  } else if (WIFEXITED(wait_status)) {
    s.code = WEXITSTATUS(wait_status);
  }
  return s;
}

Process::Process(Os* os, pid_t pid, bool group_leader, int stdin_fd,
                 int stdout_fd, int stderr_fd)
    : os_(os),
      pid_(pid),
      group_leader_(group_leader),
      stdin_fd_(stdin_fd),
      stdout_fd_(stdout_fd),
      stderr_fd_(stderr_fd) {}

Process::~Process() {
  for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_}) {
    if (fd >= 0) close(fd);
  }
}

int Process::TakeStdin() { return std::exchange(stdin_fd_, -1); }
int Process::TakeStdout() { return std::exchange(stdout_fd_, -1); }
int Process::TakeStderr() { return std::exchange(stderr_fd_, -1); }

absl::StatusOr<ExitStatus> Process::Wait() {
  if (reaped_) return absl::FailedPreconditionError("process already reaped");
  absl::StatusOr<ExitStatus> status = os_->WaitChild(pid_);
  if (status.ok()) reaped_ = true;
  return status;
}

absl::StatusOr<ExitStatus> Process::TryWait() {
  if (reaped_) return absl::FailedPreconditionError("process already reaped");
  absl::StatusOr<ExitStatus> status = os_->TryWaitChild(pid_);
  if (status.ok()) reaped_ = true;
  return status;
}

absl::Status Process::Signal(int sig) {
  return group_leader_ ? os_->SignalGroup(pid_, sig) : os_->Signal(pid_, sig);
}

absl::StatusOr<std::string> FindProgram(absl::string_view program,
                                        absl::string_view path) {
  if (program.empty()) return absl::InvalidArgumentError("empty program name");
  if (program.find('/') != absl::string_view::npos) return std::string(program);
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    std::string candidate =
        absl::StrCat(dir.empty() ? "." : dir, "/", program);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("'", program, "': command not found in PATH ", path));
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    env.emplace_back(*e);
  }
  return env;
}

std::string EnvValue(const std::vector<std::string>& env,
                     absl::string_view name) {
  for (const std::string& kv : env) {
    if (kv.size() > name.size() && kv[name.size()] == '=' &&
        absl::string_view(kv).substr(0, name.size()) == name) {
      return kv.substr(name.size() + 1);
    }
  }
  return "";
}

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("write: ", strerror(errno)));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

std::string ReadLines(int fd,
                      absl::FunctionRef<void(absl::string_view)> on_line) {
  std::string pending;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = pending.find('\n', start)) != std::string::npos) {
      on_line(absl::string_view(pending).substr(start, nl - start));
      start = nl + 1;
    }
    pending.erase(0, start);
  }
  return pending;
}

namespace {

// Polls `os` until no group of `pgids` exists (true) or `limit` has passed
// (false).
bool AwaitGroupsGone(Os* os, const std::vector<pid_t>& pgids,
                     absl::Duration limit) {
  const absl::Time deadline = os->Now() + limit;
  while (true) {
    bool any = false;
    for (pid_t g : pgids) any = any || os->GroupExists(g);
    if (!any) return true;
    if (os->Now() >= deadline) return false;
    os->SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

bool TerminateGroups(Os* os, const std::vector<pid_t>& pgids, int sig,
                     absl::Duration grace, absl::Duration kill_wait) {
  std::vector<pid_t> groups;
  for (pid_t g : pgids) {
    if (g > 1) groups.push_back(g);
  }
  for (pid_t g : groups) os->SignalGroup(g, sig).IgnoreError();
  if (AwaitGroupsGone(os, groups, grace)) return true;
  for (pid_t g : groups) os->SignalGroup(g, SIGKILL).IgnoreError();
  return AwaitGroupsGone(os, groups, kill_wait);
}

}  // namespace host
}  // namespace hvd
