#include "tests/multihost/multihost_test_base.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/common/random_hex.h"

namespace hvd {
namespace multihost {
namespace {

std::string Abs(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return path;
  return buf;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Process state letter from /proc/<pid>/stat; 0 when gone.
char State(const std::string& pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return 0;
  return stat[paren + 2];
}

}  // namespace

void MultiHostTest::SetUp() {
  ASSERT_NE(getenv("HVD_MH_DIR"), nullptr)
      << "run under tests/multihost/netns_hosts.sh run";
  mark_ =
      absl::StrCat("HVD_TEST_MARK=", RandomHex(32).value().substr(0, 12));
  tmp_ = getenv("TEST_TMPDIR") != nullptr ? getenv("TEST_TMPDIR") : "/tmp";
}

std::string MultiHostTest::Var(const std::string& what,
                               const std::string& host) {
  const char* v = getenv(absl::StrCat("HVD_MH_", what, "_", host).c_str());
  return v != nullptr ? v : "";
}

std::string MultiHostTest::Driver() {
  return Abs(launcher::Runfile("tests/multihost/driver"));
}

std::string MultiHostTest::IdentityDriver() {
  return Abs(launcher::Runfile("tests/multihost/identity_driver"));
}

std::string MultiHostTest::Agent() {
  return Abs(launcher::Runfile("agent/hvd-agent"));
}

std::vector<std::string> MultiHostTest::Hvdrun(
    const std::vector<std::string>& args, const std::string& host,
    bool with_key) const {
  std::vector<std::string> argv = {
      "/usr/sbin/ip", "netns", "exec", Var("NETNS", host),
      Abs(launcher::Runfile("launcher/hvdrun")), "--agent-path", Agent(),
      "--ssh-config-file", getenv("HVD_MH_SSH_CONFIG")};
  if (with_key) {
    argv.push_back("-i");
    argv.push_back(getenv("HVD_MH_SSH_KEY"));
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> MultiHostTest::Env() const {
  return {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", mark_};
}

launcher::CommandResult MultiHostTest::Run(const std::vector<std::string>& args,
                                           const std::string& host) {
  return launcher::RunCommand(Hvdrun(args, host), Env(), absl::Seconds(40),
                              tmp_);
}

std::vector<pid_t> MultiHostTest::JobProcesses(bool ignore_sshd) const {
  std::set<ino_t> namespaces;
  for (absl::string_view h :
       absl::StrSplit(absl::StrCat("h0 ", getenv("HVD_MH_HOSTS")), ' ',
                      absl::SkipEmpty())) {
    struct stat st;
    std::string ns = Var("NETNS", std::string(h));
    if (stat(absl::StrCat("/run/netns/", ns).c_str(), &st) == 0) {
      namespaces.insert(st.st_ino);
    }
  }
  std::set<pid_t> sshd;
  for (absl::string_view p :
       absl::StrSplit(getenv("HVD_MH_SSHD_PIDS"), ' ', absl::SkipEmpty())) {
    pid_t pid;
    if (absl::SimpleAtoi(p, &pid)) sshd.insert(pid);
  }
  std::set<pid_t> out;
  for (pid_t p : launcher::LiveProcessesWithEnv(mark_)) out.insert(p);
  DIR* dir = opendir("/proc");
  while (struct dirent* ent = readdir(dir)) {
    std::string pid = ent->d_name;
    if (pid.empty() || pid[0] < '0' || pid[0] > '9') continue;
    struct stat st;
    if (stat(absl::StrCat("/proc/", pid, "/ns/net").c_str(), &st) != 0) continue;
    if (!namespaces.count(st.st_ino)) continue;
    pid_t n = atoi(pid.c_str());
    char state = State(pid);
    if (sshd.count(n) || state == 0 || state == 'Z' || state == 'X') continue;
    if (ignore_sshd &&
        absl::StripTrailingAsciiWhitespace(
            ReadFile(absl::StrCat("/proc/", pid, "/comm"))) == "sshd") {
      continue;
    }
    out.insert(n);
  }
  closedir(dir);
  return std::vector<pid_t>(out.begin(), out.end());
}

::testing::AssertionResult MultiHostTest::NothingLeftWithin(
    absl::Duration timeout, bool ignore_sshd) const {
  absl::Time deadline = absl::Now() + timeout;
  std::vector<pid_t> left;
  while (true) {
    left = JobProcesses(ignore_sshd);
    if (left.empty()) return ::testing::AssertionSuccess();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::vector<std::string> described;
  for (pid_t p : left) {
    std::string cmd = ReadFile(absl::StrCat("/proc/", p, "/cmdline"));
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    described.push_back(absl::StrCat(p, " [", cmd, "]"));
  }
  return ::testing::AssertionFailure()
         << "left after " << absl::FormatDuration(timeout) << ": "
         << absl::StrJoin(described, ", ");
}

std::vector<pid_t> MultiHostTest::Workers(const std::string& entry) const {
  std::vector<pid_t> marked = launcher::LiveProcessesWithEnv(mark_);
  std::set<pid_t> with_entry;
  for (pid_t p : launcher::LiveProcessesWithEnv(entry)) with_entry.insert(p);
  std::vector<pid_t> out;
  for (pid_t p : marked) {
    if (with_entry.count(p)) out.push_back(p);
  }
  return out;
}

bool MultiHostTest::WaitForWorkers(const std::string& entry, size_t n,
                                   absl::Duration timeout) const {
  absl::Time deadline = absl::Now() + timeout;
  while (Workers(entry).size() < n) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

pid_t MultiHostTest::AgentPid(const std::string& host) const {
  struct stat ns_stat;
  if (stat(absl::StrCat("/run/netns/", Var("NETNS", host)).c_str(),
           &ns_stat) != 0) {
    return -1;
  }
  DIR* dir = opendir("/proc");
  pid_t found = -1;
  while (struct dirent* ent = readdir(dir)) {
    std::string pid = ent->d_name;
    if (pid.empty() || pid[0] < '0' || pid[0] > '9') continue;
    struct stat st;
    if (stat(absl::StrCat("/proc/", pid, "/ns/net").c_str(), &st) != 0 ||
        st.st_ino != ns_stat.st_ino) {
      continue;
    }
    std::string comm(absl::StripTrailingAsciiWhitespace(
        ReadFile(absl::StrCat("/proc/", pid, "/comm"))));
    if (comm == "hvd-agent" && State(pid) != 'Z') {
      found = atoi(pid.c_str());
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace multihost
}  // namespace hvd
