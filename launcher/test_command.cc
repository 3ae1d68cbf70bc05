#include "launcher/test_command.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

void Drain(int fd, std::string* out) {
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
}

bool IsZombie(const std::string& pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return true;  // gone
  size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ||
         line[paren + 2] == 'Z' || line[paren + 2] == 'X';
}

}  // namespace

BackgroundCommand::BackgroundCommand(std::vector<std::string> argv,
                                     std::vector<std::string> env,
                                     const std::string& cwd) {
  host::SpawnOptions o;
  o.argv = std::move(argv);
  o.env = std::move(env);
  o.cwd = cwd;
  o.stdout_mode = host::Stdio::kPipe;
  o.stderr_mode = host::Stdio::kPipe;
  absl::StatusOr<std::unique_ptr<host::Process>> p = host::RealOs()->Spawn(o);
  if (!p.ok()) {
    ADD_FAILURE() << "cannot start " << o.argv[0] << ": " << p.status();
    abort();
  }
  process_ = *std::move(p);
  int out = process_->TakeStdout(), err = process_->TakeStderr();
  out_thread_ = std::thread([this, out] { Drain(out, &out_); });
  err_thread_ = std::thread([this, err] { Drain(err, &err_); });
}

BackgroundCommand::~BackgroundCommand() {
  if (!waited_) Wait(absl::Seconds(30));
}

CommandResult BackgroundCommand::Wait(absl::Duration timeout) {
  waited_ = true;
  CommandResult r;
  host::Os* const os = host::RealOs();
  absl::Time deadline = os->Now() + timeout;
  while (true) {
    absl::StatusOr<host::ExitStatus> s = process_->TryWait();
    if (s.ok()) {
      r.status = *s;
      break;
    }
    if (os->Now() >= deadline) {
      r.timed_out = true;
      process_->Signal(SIGKILL).IgnoreError();
      r.status = process_->Wait().value_or(host::ExitStatus{-1, 0});
      break;
    }
    os->SleepFor(absl::Milliseconds(10));
  }
  // Output of a dead command can be held open by something it started; do
  // not wait on that forever.
  out_thread_.join();
  err_thread_.join();
  r.out = out_;
  r.err = err_;
  return r;
}

CommandResult RunCommand(std::vector<std::string> argv,
                         std::vector<std::string> env, absl::Duration timeout,
                         const std::string& cwd) {
  BackgroundCommand c(std::move(argv), std::move(env), cwd);
  return c.Wait(timeout);
}

std::vector<pid_t> LiveProcessesWithEnv(absl::string_view entry) {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (struct dirent* ent = readdir(dir)) {
    std::string pid = ent->d_name;
    if (pid.empty() || pid[0] < '0' || pid[0] > '9') continue;
    if (atoi(pid.c_str()) == host::RealOs()->ProcessId()) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/environ"));
    std::stringstream ss;
    ss << in.rdbuf();
    for (absl::string_view e : absl::StrSplit(ss.str(), '\0')) {
      if (e == entry) {
        if (!IsZombie(pid)) out.push_back(atoi(pid.c_str()));
        break;
      }
    }
  }
  closedir(dir);
  return out;
}

std::vector<pid_t> WaitForNoProcessesWithEnv(absl::string_view entry,
                                             absl::Duration timeout) {
  host::Os* const os = host::RealOs();
  absl::Time deadline = os->Now() + timeout;
  while (true) {
    std::vector<pid_t> left = LiveProcessesWithEnv(entry);
    if (left.empty() || os->Now() >= deadline) return left;
    os->SleepFor(absl::Milliseconds(50));
  }
}

std::string Runfile(absl::string_view path) {
  const char* srcdir = getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/hvd/", path);
}

}  // namespace launcher
}  // namespace hvd
