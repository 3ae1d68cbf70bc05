// What a job says: the messages the launcher sends its agents
// (proto/launcher.proto), and what it makes of the exit reports they send
// back. Pure functions; no state.
#ifndef HVD_LAUNCHER_JOB_MESSAGES_H_
#define HVD_LAUNCHER_JOB_MESSAGES_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "host/output_lines.h"
#include "launcher/job_config.h"
#include "launcher/job_host.h"
#include "proto/launcher.pb.h"

namespace hvd {
namespace launcher {

// The answer to an accepted Hello: the host's index and the job's heartbeat
// and kill-grace timing.
LauncherMessage WelcomeMessage(const JobConfig& config, int host_index);
// The LaunchSpec of `host`: the command (the agent's own in orchestrator
// mode when the config has none), environment, ranks and data-plane address.
LauncherMessage LaunchMessage(const JobConfig& config, const JobHost& host);
LauncherMessage TerminateMessage(const std::string& reason);
LauncherMessage ShutdownMessage(int exit_code);
LauncherMessage HeartbeatMessage();

// How one worker's exit fails the job: hvdrun's exit code (127 when it could
// not start, else the shell's code of its exit) and the line hvdrun prints
// ("hvdrun: rank 3 (host h2) exited with code 1"). nullopt for a clean exit.
struct JobFailure {
  int code = 1;
  std::string message;
};
std::optional<JobFailure> WorkerExitFailure(const WorkerExit& exit,
                                            const std::string& host_name);

host::OutputStream StreamOf(const WorkerOutput& output);

// "2.5 s", for hvdrun's messages.
std::string FormatSeconds(absl::Duration d);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_MESSAGES_H_
