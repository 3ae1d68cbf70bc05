#include "host/fake_os.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace hvd {
namespace host {

FakeOs::FakeOs(absl::Time start) : now_(start) {}

FakeOs::~FakeOs() {
  absl::MutexLock lock(&mu_);
  for (auto& [pid, p] : processes_) {
    if (!p.ended.has_value()) End(&p, ExitStatus{0, SIGKILL});
  }
}

absl::StatusOr<std::unique_ptr<Process>> FakeOs::Spawn(
    const SpawnOptions& options) {
  absl::MutexLock lock(&mu_);
  if (spawn_error_.has_value()) return *spawn_error_;
  const Stdio modes[3] = {options.stdin_mode, options.stdout_mode,
                          options.stderr_mode};
  int parent_fds[3] = {-1, -1, -1};
  FakeProcess p;
  for (int i = 0; i < 3; ++i) {
    if (modes[i] != Stdio::kPipe) continue;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
      const int e = errno;
      for (int fd : parent_fds) {
        if (fd >= 0) close(fd);
      }
      End(&p, ExitStatus{});
      return absl::InternalError(absl::StrCat("pipe: ", strerror(e)));
    }
    // stdin: the child reads; stdout and stderr: the child writes.
    parent_fds[i] = i == 0 ? fds[1] : fds[0];
    p.child_fds.push_back(i == 0 ? fds[0] : fds[1]);
  }
  const pid_t pid = next_pid_++;
  p.pgid = options.new_process_group ? pid : kProcessId;
  processes_.emplace(pid, std::move(p));
  return std::make_unique<Process>(this, pid, options.new_process_group,
                                   parent_fds[0], parent_fds[1], parent_fds[2]);
}

absl::StatusOr<ExitStatus> FakeOs::WaitChild(pid_t pid) {
  return Reap(pid, /*block=*/true);
}

absl::StatusOr<ExitStatus> FakeOs::TryWaitChild(pid_t pid) {
  return Reap(pid, /*block=*/false);
}

absl::StatusOr<ExitStatus> FakeOs::Reap(pid_t pid, bool block) {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end() || it->second.reaped) {
    return absl::InternalError(
        absl::StrCat("waitpid(", pid, "): No child processes"));
  }
  FakeProcess& p = it->second;
  auto ended = [&p] { return p.ended.has_value(); };
  if (block) mu_.Await(absl::Condition(&ended));
  if (!ended()) return absl::NotFoundError("still running");
  p.reaped = true;
  return *p.ended;
}

absl::Status FakeOs::Signal(pid_t pid, int sig) {
  return Deliver(pid, /*group=*/false, sig);
}

absl::Status FakeOs::SignalGroup(pid_t pgid, int sig) {
  return Deliver(pgid, /*group=*/true, sig);
}

absl::Status FakeOs::Deliver(pid_t target, bool group, int sig) {
  absl::MutexLock lock(&mu_);
  signals_.push_back(SentSignal{now_, target, group, sig});
  if (sig == 0 || ignored_.count(sig) > 0) return absl::OkStatus();
  for (auto& [pid, p] : processes_) {
    if ((group ? p.pgid : pid) != target || p.ended.has_value()) continue;
    if (sig == SIGSTOP || sig == SIGCONT) {
      p.stopped = sig == SIGSTOP;
    } else {
      End(&p, ExitStatus{0, sig});
    }
  }
  return absl::OkStatus();
}

void FakeOs::End(FakeProcess* p, ExitStatus status) {
  p->ended = status;
  for (int fd : p->child_fds) close(fd);
  p->child_fds.clear();
}

bool FakeOs::GroupExists(pid_t pgid) {
  absl::MutexLock lock(&mu_);
  for (const auto& [pid, p] : processes_) {
    if (p.pgid == pgid && !p.ended.has_value()) return true;
  }
  return false;
}

bool FakeOs::IsStopped(pid_t pid) {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(pid);
  return it != processes_.end() && !it->second.ended.has_value() &&
         it->second.stopped;
}

absl::Time FakeOs::Now() {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeOs::SleepFor(absl::Duration d) { Advance(d); }

void FakeOs::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

void FakeOs::FailSpawns(absl::Status error) {
  absl::MutexLock lock(&mu_);
  spawn_error_ = std::move(error);
}

void FakeOs::IgnoreSignal(int sig) {
  absl::MutexLock lock(&mu_);
  ignored_.insert(sig);
}

std::vector<FakeOs::SentSignal> FakeOs::signals() const {
  absl::MutexLock lock(&mu_);
  return signals_;
}

bool FakeOs::AwaitSignals(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return signals_.size() >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

std::ostream& operator<<(std::ostream& os, const FakeOs::SentSignal& s) {
  return os << "signal " << s.sig << " to " << (s.group ? "group " : "pid ")
            << s.target << " at " << absl::FormatTime(s.at);
}

}  // namespace host
}  // namespace hvd
