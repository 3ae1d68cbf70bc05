#include "agent/reaper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "host/process.h"

namespace hvd {
namespace agent {
namespace {

[[noreturn]] void ReaperMain(host::Os* os, int fd, absl::Duration grace) {
  prctl(PR_SET_NAME, "hvd-reaper");
  // The agent's terminal, ssh session and signals are not ours: only the
  // pipe's end decides when to act.
  int null_fd = open("/dev/null", O_RDWR);
  for (int i = 0; i < 3; ++i) dup2(null_fd, i);
  if (null_fd > 2) close(null_fd);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) {
    signal(sig, SIG_IGN);
  }
  std::set<pid_t> groups;
  // An unterminated last line is a write the agent did not finish: ignored.
  host::ReadLines(fd, [&groups](absl::string_view line) {
    pid_t pgid;
    if (line.size() < 2 || !absl::SimpleAtoi(line.substr(1), &pgid)) return;
    if (line[0] == '+') groups.insert(pgid);
    if (line[0] == '-') groups.erase(pgid);
  });
  host::TerminateGroups(os, std::vector<pid_t>(groups.begin(), groups.end()),
                        SIGTERM, grace, /*kill_wait=*/absl::ZeroDuration());
  _exit(0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Reaper>> Reaper::Start(host::Os* os,
                                                      absl::Duration grace) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(e)));
  }
  if (pid == 0) {
    close(p[1]);
    ReaperMain(os, p[0], grace);
  }
  close(p[0]);
  return std::unique_ptr<Reaper>(new Reaper(os, p[1], pid));
}

Reaper::~Reaper() {
  {
    absl::MutexLock lock(&mu_);
    close(fd_);
    fd_ = -1;
  }
  os_->WaitChild(pid_).IgnoreError();
}

void Reaper::Send(char op, pid_t pgid) {
  std::string line = absl::StrCat(std::string(1, op), pgid, "\n");
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) host::WriteAll(fd_, line).IgnoreError();
}

void Reaper::Track(pid_t pgid) { Send('+', pgid); }
void Reaper::Untrack(pid_t pgid) { Send('-', pgid); }

}  // namespace agent
}  // namespace hvd
