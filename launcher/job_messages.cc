#include "launcher/job_messages.h"

#include "absl/strings/str_cat.h"
#include "host/process.h"

namespace hvd {
namespace launcher {
namespace {

int Milliseconds(absl::Duration d) {
  return static_cast<int>(absl::ToInt64Milliseconds(d));
}

}  // namespace

LauncherMessage WelcomeMessage(const JobConfig& config, int host_index) {
  LauncherMessage m;
  Welcome* w = m.mutable_welcome();
  w->set_host_index(host_index);
  w->set_heartbeat_interval_ms(Milliseconds(config.heartbeat_interval));
  w->set_heartbeat_timeout_ms(Milliseconds(config.heartbeat_timeout));
  w->set_kill_grace_ms(Milliseconds(config.kill_grace));
  return m;
}

LauncherMessage LaunchMessage(const JobConfig& config, const JobHost& host) {
  LauncherMessage m;
  LaunchSpec* spec = m.mutable_launch();
  if (!config.command.empty()) {
    for (const std::string& c : config.command) spec->add_command(c);
  } else {
    *spec->mutable_command() = host.hello.command();
  }
  for (const auto& [k, v] : config.env) (*spec->mutable_env())[k] = v;
  spec->set_cwd(config.cwd);
  spec->set_hostname(host.name);
  spec->set_size(config.np);
  for (const WorkerSlot& w : host.workers) {
    WorkerSpec* ws = spec->add_workers();
    ws->set_rank(w.rank);
    ws->set_local_rank(w.local_rank);
    ws->set_local_size(w.local_size);
    ws->set_cross_rank(w.cross_rank);
    ws->set_cross_size(w.cross_size);
    ws->set_elastic_worker_id(w.elastic_id);
  }
  spec->set_data_plane_address(host.data_plane);
  spec->set_bind_to_cores(config.bind_to_cores);
  return m;
}

LauncherMessage TerminateMessage(const std::string& reason) {
  LauncherMessage m;
  m.mutable_terminate()->set_reason(reason);
  return m;
}

LauncherMessage ShutdownMessage(int exit_code) {
  LauncherMessage m;
  m.mutable_shutdown()->set_exit_code(exit_code);
  return m;
}

LauncherMessage HeartbeatMessage() {
  LauncherMessage m;
  m.mutable_heartbeat();
  return m;
}

std::optional<JobFailure> WorkerExitFailure(const WorkerExit& exit,
                                            const std::string& host_name) {
  const std::string who =
      absl::StrCat("hvdrun: rank ", exit.rank(), " (host ", host_name, ")");
  if (!exit.start_error().empty()) {
    return JobFailure{
        127, absl::StrCat(who, " could not start: ", exit.start_error())};
  }
  const host::ExitStatus status{exit.exit_code(), exit.signal()};
  if (status.ok()) return std::nullopt;
  return JobFailure{status.ShellCode(),
                    absl::StrCat(who, " ", status.ToString())};
}

host::OutputStream StreamOf(const WorkerOutput& output) {
  return output.stream() == WorkerOutput::STDERR ? host::OutputStream::kStderr
                                                 : host::OutputStream::kStdout;
}

std::string FormatSeconds(absl::Duration d) {
  return absl::StrCat(absl::ToDoubleSeconds(d), " s");
}

}  // namespace launcher
}  // namespace hvd
