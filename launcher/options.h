// hvdrun's command line: horovodrun's flags (so job scripts carry over) plus
// a few of hvd's own. Parsing only; what the values mean for hosts and
// environment is in hosts.h and environment.h.
#ifndef HVD_LAUNCHER_OPTIONS_H_
#define HVD_LAUNCHER_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launcher/hosts.h"

namespace hvd {
namespace launcher {

// An elastic job's flags (Horovod's names). A job is elastic when it gives
// --min-np or --host-discovery-script (launcher/elastic_driver.h).
struct ElasticOptions {
  std::optional<int> min_np;               // --min-np/--min-num-proc
  std::optional<int> max_np;               // --max-np/--max-num-proc
  std::optional<int> slots_per_host;       // --slots-per-host
  std::optional<int> elastic_timeout_s;    // --elastic-timeout
  std::optional<int> reset_limit;          // --reset-limit
  std::optional<int> cooldown_min_s;       // --blacklist-cooldown-range MIN MAX
  std::optional<int> cooldown_max_s;
  std::string host_discovery_script;       // --host-discovery-script
};

// hvdrun starts up to this many agents over ssh itself; a job on more
// hosts starts the rest through a tree of agents.
inline constexpr int kDefaultLaunchFanout = 64;

struct Options {
  std::optional<int> num_proc;      // -np/--num-proc/--np
  std::string hosts;                // -H/--hosts, unparsed
  std::string hostfile;             // --hostfile
  std::optional<int> ssh_port;      // -p/--ssh-port
  std::string ssh_identity_file;    // -i/--ssh-identity-file
  std::string ssh_config_file;      // --ssh-config-file (hvd)
  // --launch-fanout (hvd): the most agents any one process starts over ssh;
  // unset: kDefaultLaunchFanout.
  std::optional<int> launch_fanout;
  std::vector<std::string> network_interfaces;  // --network-interfaces a,b
  absl::Duration start_timeout = absl::Seconds(30);
  bool start_timeout_given = false;
  std::string output_filename;      // --output-filename DIR
  bool prefix_output_with_timestamp = false;  // --prefix-output-with-timestamp
  bool verbose = false;
  std::string log_level;            // --log-level
  std::string transport;            // --transport auto|rdma|tcp (and --tcp)
  // --bind-to cores|none (hvd): each worker on an equal share of its host's
  // cores (host/cpu_binding.h), or wherever the OS puts it. "": cores.
  std::string bind_to;
  std::vector<std::string> env;     // -x/--env NAME[=VALUE], in order
  std::string config_file;          // --config-file (Horovod's YAML)
  bool version = false;
  bool help = false;
  bool check_build = false;         // -cb/--check-build
  bool self_test = false;           // --self-test (hvd's own)
  std::optional<double> self_test_threshold;  // --self-test-threshold
  std::optional<int> self_test_mb;            // --self-test-mb

  // Tunables that become worker environment (unset: not passed; a boolean
  // set false by a --no- form is passed as 0, overriding the environment).
  std::optional<double> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<int> cache_capacity;
  std::string timeline_filename;
  std::optional<bool> timeline_mark_cycles;
  std::optional<bool> no_stall_check;
  std::optional<bool> hierarchical_allreduce;
  std::optional<bool> hierarchical_allgather;
  std::optional<int> stall_check_warning_time_seconds;
  std::optional<int> stall_check_shutdown_time_seconds;
  std::optional<int> timeout_seconds;     // --gloo-timeout-seconds
  std::optional<bool> log_hide_timestamp;  // --log-without-timestamp etc.
  bool nccl_ib_disable = false;           // --tcp
  // --autotune (--no-autotune: false) and its settings (HVD_AUTOTUNE_*).
  std::optional<bool> autotune;
  std::string autotune_log_file;
  std::optional<int> autotune_warmup_samples;
  std::optional<int> autotune_steps_per_sample;
  std::optional<int> autotune_max_samples;
  std::optional<double> autotune_noise;

  ElasticOptions elastic;

  // hvd's own.
  std::string agent_path;           // --agent-path (default: see hvdrun)
  absl::Duration kill_grace = absl::Seconds(5);  // --kill-grace-seconds
  bool rendezvous_only = false;     // --rendezvous-only
  std::optional<int> port;          // --port
  // --metrics-port P: Prometheus /metrics of every rank, served on P; the
  // workers report every few seconds (HVD_METRICS_INTERVAL).
  std::optional<int> metrics_port;
  // --metrics-linger-seconds S: after the job ends, keep serving S seconds
  // (the page then shows how it ended; the last scrape sees the totals).
  absl::Duration metrics_linger = absl::ZeroDuration();
  std::string rendezvous_file;      // --rendezvous-file F
  // TLS to the rendezvous: a launched job with remote hosts uses its own CA
  // unless --no-tls; --rendezvous-only serves the given certificate.
  bool no_tls = false;              // --no-tls
  std::string tls_cert;             // --tls-cert FILE (--rendezvous-only)
  std::string tls_key;              // --tls-key FILE (--rendezvous-only)

  // Not a flag: the Slurm allocation hvdrun takes its hosts from, when it
  // runs in one without -H/--hostfile (ApplySlurmAllocation,
  // launcher/slurm_allocation.h). Agents then start with srun.
  std::optional<SlurmAllocation> slurm;

  // One line for each horovodrun flag given that means nothing in hvd,
  // saying why (hvdrun prints them and goes on).
  std::vector<std::string> notes;

  // Everything from the first argument that is not a flag (or after "--").
  std::vector<std::string> command;
};

// Parses argv[1..]. The command starts at the first argument that is not a
// flag or a flag's value, so the user's program keeps its own flags. Every
// flag horovodrun 0.28 accepts is accepted: with its meaning, or with a note
// saying why it has none here. --config-file is read here too (a flag on
// the command line wins over the file).
// InvalidArgument with a one-line message on an unknown flag, a missing or
// malformed value, a flag given twice where that makes no sense, or a
// config file that cannot be read or holds a bad value.
// Consistency checks that need more than one flag (np vs slots, -H with
// --hostfile, no command) are in ValidateOptions.
absl::StatusOr<Options> ParseCommandLine(const std::vector<std::string>& args);

// Cross-flag checks that need no file or network access: np > 0, -H and
// --hostfile not both, a command unless --rendezvous-only, and so on.
// Whether `o` asks for an elastic job.
bool IsElastic(const Options& o);

absl::Status ValidateOptions(const Options& options);

// The --help text (flags, and which variables are not forwarded).
std::string HelpText();

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_OPTIONS_H_
