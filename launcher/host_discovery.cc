#include "launcher/host_discovery.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hvd {
namespace launcher {
namespace {

// Reads the child's stdout and stderr until both close or `deadline`.
// Returns false at the deadline.
bool Drain(int out_fd, int err_fd, absl::Time deadline, std::string* out,
           std::string* err) {
  struct Stream {
    int fd;
    std::string* text;
  } streams[2] = {{out_fd, out}, {err_fd, err}};
  int open = 2;
  while (open > 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fds[2];
    int n = 0;
    for (const Stream& s : streams) {
      if (s.fd >= 0) fds[n++] = {s.fd, POLLIN, 0};
    }
    if (poll(fds, n, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <
        0) {
      continue;  // EINTR
    }
    for (Stream& s : streams) {
      if (s.fd < 0) continue;
      char buf[4096];
      pollfd probe = {s.fd, POLLIN, 0};
      if (poll(&probe, 1, 0) <= 0) continue;
      const ssize_t got = read(s.fd, buf, sizeof(buf));
      if (got > 0 && s.text->size() < (1u << 20)) {
        s.text->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (got < 0 && errno != EINTR)) {
        s.fd = -1;
        --open;
      }
    }
  }
  return true;
}

std::string Tail(std::string text) {
  absl::StripTrailingAsciiWhitespace(&text);
  if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
  return text.empty() ? "(nothing on stderr)" : text;
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseDiscoveryOutput(
    absl::string_view output, int default_slots, absl::string_view script) {
  std::vector<HostSlots> hosts;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const bool has_slots = line.find(':') != absl::string_view::npos;
    absl::StatusOr<std::vector<HostSlots>> parsed = ParseHostList(line);
    if (!parsed.ok() || parsed->size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host discovery script ", script, " printed a bad line ",
          line_number, ": '", line, "' (want host or host:slots)"));
    }
    HostSlots h = (*parsed)[0];
    if (!has_slots) h.slots = default_slots;
    for (const HostSlots& seen : hosts) {
      if (seen.name == h.name) {
        return absl::InvalidArgumentError(
            absl::StrCat("host discovery script ", script, " printed host '",
                         h.name, "' twice"));
      }
    }
    hosts.push_back(std::move(h));
  }
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> RunDiscoveryScript(
    host::Os* os, const std::string& script,
    const std::vector<std::string>& env, int default_slots,
    absl::Duration timeout) {
  host::SpawnOptions spawn;
  spawn.argv = {script};
  spawn.env = env;
  spawn.stdout_mode = host::Stdio::kPipe;
  spawn.stderr_mode = host::Stdio::kPipe;
  absl::StatusOr<std::unique_ptr<host::Process>> child = os->Spawn(spawn);
  if (!child.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot run host discovery script ", script, ": ",
        child.status().message()));
  }
  std::string out, err;
  const bool done = Drain((*child)->stdout_fd(), (*child)->stderr_fd(),
                          absl::Now() + timeout, &out, &err);
  if (!done) (*child)->Signal(SIGKILL).IgnoreError();
  absl::StatusOr<host::ExitStatus> status = (*child)->Wait();
  if (!done) {
    return absl::DeadlineExceededError(
        absl::StrCat("host discovery script ", script, " did not finish in ",
                     absl::FormatDuration(timeout), ": ", Tail(err)));
  }
  if (!status.ok()) return status.status();
  if (!status->ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host discovery script ", script, " ",
                     status->ToString(), ": ", Tail(err)));
  }
  return ParseDiscoveryOutput(out, default_slots, script);
}

FixedHostDiscovery::FixedHostDiscovery(std::vector<HostSlots> hosts,
                                       absl::Time now)
    : view_{std::move(hosts), now, ""} {}

HostDiscovery::View FixedHostDiscovery::Latest() { return view_; }

ScriptHostDiscovery::ScriptHostDiscovery(Options options, host::Os* os,
                                         std::vector<HostSlots> first)
    : options_(std::move(options)), os_(os) {
  {
    absl::MutexLock lock(&mu_);
    view_ = {std::move(first), os_->Now(), ""};
  }
  thread_ = std::thread([this] { Loop(); });
}

ScriptHostDiscovery::~ScriptHostDiscovery() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

HostDiscovery::View ScriptHostDiscovery::Latest() {
  absl::MutexLock lock(&mu_);
  return view_;
}

void ScriptHostDiscovery::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval)) {
        return;
      }
    }
    absl::StatusOr<std::vector<HostSlots>> hosts =
        RunDiscoveryScript(os_, options_.script, options_.env,
                           options_.default_slots, options_.run_timeout);
    absl::MutexLock lock(&mu_);
    if (hosts.ok()) {
      view_ = {*std::move(hosts), os_->Now(), ""};
    } else {
      view_.last_error = std::string(hosts.status().message());
    }
  }
}

}  // namespace launcher
}  // namespace hvd
