// An elastic job's side of Job: hosts added and removed while it runs, each
// launched as soon as its agent joins; the membership itself is the
// driver's (launcher/elastic_driver.h).
#include "absl/strings/str_cat.h"
#include "launcher/agent_conn.h"
#include "launcher/job.h"
#include "launcher/job_addresses.h"
#include "launcher/job_host.h"
#include "launcher/job_messages.h"

namespace hvd {
namespace launcher {

void Job::StepElastic(absl::Time now) {
  phase_ = Phase::kRunning;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const int h = static_cast<int>(i);
    JobHost& host = hosts_[i];
    if (!host.in_job || host.lost || host.launched) continue;
    if (!host.joined) {
      if (config_.start_timeout != absl::InfiniteDuration() &&
          now - host.added > config_.start_timeout) {
        HostLost(h, absl::StrCat("hvd-agent did not connect within ",
                                 FormatSeconds(config_.start_timeout),
                                 " (--start-timeout)"));
      }
      continue;
    }
    // No probing between hosts that come and go: the named interface, or
    // the address the agent reached hvdrun from.
    if (!config_.network_interfaces.empty()) {
      absl::StatusOr<std::string> address =
          NamedInterfaceAddress(host, config_.network_interfaces);
      if (!address.ok()) {
        HostLost(h, std::string(address.status().message()));
        continue;
      }
      host.data_plane = *address;
    } else {
      host.data_plane = host.peer_ip.empty() ? "127.0.0.1" : host.peer_ip;
    }
    host.launched = true;
    Send(h, LaunchMessage(config_, host));
  }
  config_.elastic->Step(*this, now);
}

int Job::AddHost(const std::string& name, std::vector<WorkerSlot> workers) {
  mu_.AssertHeld();
  JobHost host;
  host.name = name;
  host.slots = static_cast<int>(workers.size());
  host.workers = std::move(workers);
  host.in_job = true;
  host.process_running = true;
  host.added = os_->Now();
  hosts_.push_back(std::move(host));
  wake_ = true;
  return static_cast<int>(hosts_.size()) - 1;
}

void Job::RemoveHost(int h, const std::string& why) {
  mu_.AssertHeld();
  JobHost& host = hosts_[h];
  host.in_job = false;
  if (host.shutdown_sent) return;
  Send(h, TerminateMessage(why));
  Send(h, ShutdownMessage(0));
  host.shutdown_sent = true;
}

void Job::EndJob(int code, const std::string& message) {
  mu_.AssertHeld();
  if (code == 0 && message.empty()) {
    BeginShutdown(0);
  } else {
    Fail(code, message);
  }
}

}  // namespace launcher
}  // namespace hvd
