// hvdrun's command line: Horovod's flag names (so job scripts carry over) plus
// a few of hvd's own. Parsing only; what the values mean for hosts and
// environment is in hosts.h and environment.h.
#ifndef HVD_LAUNCHER_OPTIONS_H_
#define HVD_LAUNCHER_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hvd {
namespace launcher {

struct Options {
  std::optional<int> num_proc;      // -np/--num-proc/--np
  std::string hosts;                // -H/--hosts, unparsed
  std::string hostfile;             // --hostfile
  std::optional<int> ssh_port;      // -p/--ssh-port
  std::string ssh_identity_file;    // -i/--ssh-identity-file
  std::string ssh_config_file;      // --ssh-config-file (hvd)
  std::vector<std::string> network_interfaces;  // --network-interfaces a,b
  absl::Duration start_timeout = absl::Seconds(30);
  bool start_timeout_given = false;
  std::string output_filename;      // --output-filename DIR
  bool verbose = false;
  std::string log_level;            // --log-level
  std::string transport;            // --transport auto|rdma|tcp
  std::vector<std::string> env;     // -x/--env NAME[=VALUE], in order
  bool version = false;
  bool help = false;

  // Tunables that become worker environment (unset: not passed).
  std::optional<double> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<int> cache_capacity;
  std::string timeline_filename;
  bool no_stall_check = false;
  bool hierarchical_allreduce = false;
  std::optional<int> stall_check_warning_time_seconds;
  std::optional<int> stall_check_shutdown_time_seconds;

  // hvd's own.
  std::string agent_path;           // --agent-path (default: see hvdrun)
  absl::Duration kill_grace = absl::Seconds(5);  // --kill-grace-seconds
  bool rendezvous_only = false;     // --rendezvous-only
  std::optional<int> port;          // --port
  std::string rendezvous_file;      // --rendezvous-file F

  // Everything from the first argument that is not a flag (or after "--").
  std::vector<std::string> command;
};

// Parses argv[1..]. The command starts at the first argument that is not a
// flag or a flag's value, so the user's program keeps its own flags.
// InvalidArgument with a one-line message on an unknown flag, a missing or
// malformed value, or a flag given twice where that makes no sense.
// Consistency checks that need more than one flag (np vs slots, -H with
// --hostfile, no command) are in ValidateOptions.
absl::StatusOr<Options> ParseCommandLine(const std::vector<std::string>& args);

// Cross-flag checks that need no file or network access: np > 0, -H and
// --hostfile not both, a command unless --rendezvous-only, and so on.
absl::Status ValidateOptions(const Options& options);

// The --help text (flags, and which variables are not forwarded).
std::string HelpText();

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_OPTIONS_H_
