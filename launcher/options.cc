// Why a small hand-written parser and not absl flags or Boost.Program_options:
// hvdrun must stop at the first argument that is not a flag (the rest is the
// user's command, with its own flags), and must accept Horovod's single-dash
// long flag `-np`. absl flags are process-global and keep parsing flags after
// positional arguments; Boost.Program_options needs a custom style parser for
// both. A table of flags and one loop does it in a page, with errors worded
// for this tool.
#include "launcher/options.h"

#include <functional>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "launcher/environment.h"

namespace hvd {
namespace launcher {
namespace {

using Setter = std::function<absl::Status(Options&, const std::string&)>;

struct Flag {
  std::vector<std::string> names;  // as typed, with dashes
  bool takes_value;
  Setter set;
};

absl::Status BadValue(absl::string_view flag, absl::string_view value,
                      absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid value '", value, "' for ", flag, ": expected ", want));
}

// An integer from `min` to `max`.
Setter Int(std::optional<int> Options::*field, const char* flag, int min,
           int max = std::numeric_limits<int>::max()) {
  return [=](Options& o, const std::string& v) -> absl::Status {
    int n;
    if (!absl::SimpleAtoi(v, &n) || n < min || n > max) {
      if (max != std::numeric_limits<int>::max()) {
        return BadValue(flag, v,
                        absl::StrCat("an integer from ", min, " to ", max));
      }
      return BadValue(
          flag, v, min > 0 ? "a positive integer" : "a non-negative integer");
    }
    o.*field = n;
    return absl::OkStatus();
  };
}

Setter Double(std::optional<double> Options::*field, const char* flag) {
  return [=](Options& o, const std::string& v) -> absl::Status {
    double d;
    if (!absl::SimpleAtod(v, &d) || !(d >= 0)) {
      return BadValue(flag, v, "a non-negative number");
    }
    o.*field = d;
    return absl::OkStatus();
  };
}

Setter String(std::string Options::*field) {
  return [=](Options& o, const std::string& v) -> absl::Status {
    o.*field = v;
    return absl::OkStatus();
  };
}

Setter Seconds(absl::Duration Options::*field, const char* flag) {
  return [=](Options& o, const std::string& v) -> absl::Status {
    double d;
    if (!absl::SimpleAtod(v, &d) || !(d > 0)) {
      return BadValue(flag, v, "a positive number of seconds");
    }
    o.*field = absl::Seconds(d);
    return absl::OkStatus();
  };
}

Setter Bool(bool Options::*field) {
  return [=](Options& o, const std::string&) -> absl::Status {
    o.*field = true;
    return absl::OkStatus();
  };
}

absl::Status SetInterfaces(Options& o, const std::string& v) {
  o.network_interfaces.clear();
  for (absl::string_view s : absl::StrSplit(v, ',')) {
    s = absl::StripAsciiWhitespace(s);
    if (s.empty()) {
      return BadValue("--network-interfaces", v,
                      "a comma-separated list of interface names");
    }
    o.network_interfaces.emplace_back(s);
  }
  return absl::OkStatus();
}

absl::Status SetStartTimeout(Options& o, const std::string& v) {
  absl::Status status =
      Seconds(&Options::start_timeout, "--start-timeout")(o, v);
  if (status.ok()) o.start_timeout_given = true;
  return status;
}

absl::Status SetLogLevel(Options& o, const std::string& v) {
  static const char* kLevels[] = {"trace",   "debug", "info",
                                  "warning", "error", "fatal"};
  std::string lower = absl::AsciiStrToLower(v);
  for (const char* l : kLevels) {
    if (lower == l) {
      o.log_level = lower;
      return absl::OkStatus();
    }
  }
  return BadValue("--log-level", v,
                  "one of trace, debug, info, warning, error, fatal");
}

absl::Status SetTransport(Options& o, const std::string& v) {
  const std::string lower = absl::AsciiStrToLower(v);
  if (lower != "auto" && lower != "rdma" && lower != "tcp") {
    return BadValue("--transport", v, "one of auto, rdma, tcp");
  }
  o.transport = lower;
  return absl::OkStatus();
}

// -x NAME or -x NAME=VALUE.
absl::Status SetEnv(Options& o, const std::string& v) {
  absl::string_view name = v;
  size_t eq = name.find('=');
  if (eq != absl::string_view::npos) name = name.substr(0, eq);
  if (!IsValidVariableName(name)) {
    return BadValue("-x", v, "NAME or NAME=VALUE");
  }
  o.env.push_back(v);
  return absl::OkStatus();
}

const std::vector<Flag>& Flags() {
  static const auto* flags = new std::vector<Flag>{
      {{"-np", "--np", "--num-proc"}, true, Int(&Options::num_proc, "-np", 1)},
      {{"-H", "--hosts"}, true, String(&Options::hosts)},
      {{"--hostfile"}, true, String(&Options::hostfile)},
      {{"-p", "--ssh-port"},
       true,
       Int(&Options::ssh_port, "--ssh-port", 1, 65535)},
      {{"-i", "--ssh-identity-file"},
       true,
       String(&Options::ssh_identity_file)},
      {{"--ssh-config-file"}, true, String(&Options::ssh_config_file)},
      {{"--network-interfaces", "--network-interface"}, true, SetInterfaces},
      {{"--start-timeout"}, true, SetStartTimeout},
      {{"--output-filename"}, true, String(&Options::output_filename)},
      {{"--verbose"}, false, Bool(&Options::verbose)},
      {{"--log-level"}, true, SetLogLevel},
      {{"--transport"}, true, SetTransport},
      {{"-x", "--env"}, true, SetEnv},
      {{"--version", "-v"}, false, Bool(&Options::version)},
      {{"-h", "--help"}, false, Bool(&Options::help)},
      {{"--fusion-threshold-mb"},
       true,
       Double(&Options::fusion_threshold_mb, "--fusion-threshold-mb")},
      {{"--cycle-time-ms"},
       true,
       Double(&Options::cycle_time_ms, "--cycle-time-ms")},
      {{"--cache-capacity"},
       true,
       Int(&Options::cache_capacity, "--cache-capacity", 0)},
      {{"--timeline-filename"}, true, String(&Options::timeline_filename)},
      {{"--no-stall-check"}, false, Bool(&Options::no_stall_check)},
      {{"--hierarchical-allreduce"},
       false,
       Bool(&Options::hierarchical_allreduce)},
      {{"--stall-check-warning-time-seconds"},
       true,
       Int(&Options::stall_check_warning_time_seconds,
           "--stall-check-warning-time-seconds", 0)},
      {{"--stall-check-shutdown-time-seconds"},
       true,
       Int(&Options::stall_check_shutdown_time_seconds,
           "--stall-check-shutdown-time-seconds", 0)},
      {{"--agent-path"}, true, String(&Options::agent_path)},
      {{"--kill-grace-seconds"},
       true,
       Seconds(&Options::kill_grace, "--kill-grace-seconds")},
      {{"--rendezvous-only"}, false, Bool(&Options::rendezvous_only)},
      {{"--port"}, true, Int(&Options::port, "--port", 0, 65535)},
      {{"--rendezvous-file"}, true, String(&Options::rendezvous_file)},
  };
  return *flags;
}

const Flag* FindFlag(absl::string_view name) {
  for (const Flag& f : Flags()) {
    for (const std::string& n : f.names) {
      if (n == name) return &f;
    }
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<Options> ParseCommandLine(const std::vector<std::string>& args) {
  Options o;
  std::map<const Flag*, int> seen;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    // "-" alone, or anything not starting with '-', begins the command.
    if (arg.size() < 2 || arg[0] != '-') break;
    absl::string_view name = arg;
    std::optional<std::string> value;
    size_t eq = name.find('=');
    if (eq != absl::string_view::npos) {
      value = std::string(name.substr(eq + 1));
      name = name.substr(0, eq);
    }
    const Flag* flag = FindFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", name, "'"));
    }
    if (!flag->takes_value && value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", name, " takes no value"));
    }
    if (flag->takes_value && !value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", name, " needs a value"));
      }
      value = args[++i];
    }
    // -x accumulates; any other flag given twice is probably a mistake in a
    // generated script, and silently taking the last would hide it.
    if (++seen[flag] > 1 && flag->names[0] != "-x") {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", name, " given more than once"));
    }
    absl::Status s = flag->set(o, value.value_or(""));
    if (!s.ok()) return s;
  }
  o.command.assign(args.begin() + static_cast<long>(i), args.end());
  return o;
}

absl::Status ValidateOptions(const Options& o) {
  if (o.help || o.version) return absl::OkStatus();
  if (!o.hosts.empty() && !o.hostfile.empty()) {
    return absl::InvalidArgumentError(
        "-H/--hosts and --hostfile cannot be used together");
  }
  if (o.rendezvous_only) {
    if (!o.num_proc.has_value()) {
      return absl::InvalidArgumentError(
          "--rendezvous-only needs -np: the number of slots to wait for");
    }
    if (!o.hosts.empty() || !o.hostfile.empty()) {
      return absl::InvalidArgumentError(
          "--rendezvous-only takes no hosts: agents join by themselves");
    }
    return absl::OkStatus();
  }
  if (!o.rendezvous_file.empty()) {
    return absl::InvalidArgumentError(
        "--rendezvous-file is only meaningful with --rendezvous-only");
  }
  if (!o.num_proc.has_value() && o.hosts.empty() && o.hostfile.empty()) {
    return absl::InvalidArgumentError(
        "-np is required (or -H/--hostfile to take np from their slots)");
  }
  if (o.command.empty()) {
    return absl::InvalidArgumentError(
        "no command given: usage is hvdrun [flags] command [args...]");
  }
  return absl::OkStatus();
}

// hvdrun --help, around the list of variables workers do not inherit.
constexpr char kHelpBeforeExcluded[] =
    "usage: hvdrun [flags] command [args...]\n"
    "       hvdrun --rendezvous-only -np N [--port P] [--rendezvous-file F]"
    " [command...]\n"
    "\n"
    "Runs `command` as N processes of one hvd job. Flags end at the first\n"
    "argument that is not a flag (or at --); the rest is the command, run\n"
    "in the current directory on every host.\n"
    "\n"
    "Job:\n"
    "  -np, --num-proc N          number of processes (default: all slots)\n"
    "  -H, --hosts h1:4,h2:4      hosts and their slots (no :N = 1 slot);\n"
    "                             default localhost:N\n"
    "  --hostfile F               lines 'host slots=N' or 'host:N'; #"
    " comments\n"
    "  -x, --env NAME[=VALUE]     forward NAME (even if excluded below), or"
    " set it\n"
    "  --output-filename DIR      also write DIR/rank.<r>/stdout and"
    " stderr\n"
    "  --start-timeout S          agents and workers must start within S"
    " seconds (30)\n"
    "  --kill-grace-seconds S     SIGTERM to SIGKILL delay on shutdown (5)\n"
    "  --verbose                  say what hvdrun does\n"
    "  --log-level L              HVD_LOG_LEVEL of workers (trace..fatal)\n"
    "  --transport T              HVD_TRANSPORT of workers between hosts: auto"
    "\n"
    "                             (TCP for now), rdma (libfabric) or tcp\n"
    "  --version, -h/--help\n"
    "\n"
    "Remote hosts (ssh, BatchMode):\n"
    "  -p, --ssh-port P           ssh port\n"
    "  -i, --ssh-identity-file F  ssh private key\n"
    "  --ssh-config-file F        ssh -F F\n"
    "  --agent-path PATH          hvd-agent on the hosts (default: hvd-agent"
    " on the\n"
    "                             remote PATH; $HVD_AGENT_PATH)\n"
    "  --network-interfaces a,b   interfaces for the data plane and the\n"
    "                             rendezvous; default: addresses every other"
    " host\n"
    "                             can reach, probed at start-up\n"
    "\n"
    "Tunables (become the workers' HVD_* variables):\n"
    "  --fusion-threshold-mb MB   HVD_FUSION_THRESHOLD (bytes)\n"
    "  --cycle-time-ms MS         HVD_CYCLE_TIME\n"
    "  --cache-capacity N         HVD_CACHE_CAPACITY\n"
    "  --timeline-filename F      HVD_TIMELINE\n"
    "  --no-stall-check           HVD_STALL_CHECK_DISABLE=1\n"
    "  --hierarchical-allreduce   HVD_HIERARCHICAL_ALLREDUCE=1 (GPU tensors)\n"
    "  --stall-check-warning-time-seconds S   HVD_STALL_CHECK_TIME_SECONDS\n"
    "  --stall-check-shutdown-time-seconds S  "
    "HVD_STALL_SHUTDOWN_TIME_SECONDS\n"
    "\n"
    "Orchestrator mode (Kubernetes, Slurm):\n"
    "  --rendezvous-only          run only the rendezvous server; start\n"
    "                             `hvd-agent --rendezvous ADDR --slots K` on"
    " each node\n"
    "  --port P                   its port (default: any free port)\n"
    "  --rendezvous-file F        write address and token to F (mode 0600)\n"
    "                             instead of printing them\n"
    "\n"
    "Environment: workers get hvdrun's environment, except variables that\n"
    "belong to one host or session: ";
constexpr char kHelpAfterExcluded[] =
    ".\n"
    "Exit code: 0 if every worker exits 0; else the first failing worker's\n"
    "code (128+S for signal S); 1 for a start-up failure; 2 for bad input.\n";

std::string HelpText() {
  return absl::StrCat(kHelpBeforeExcluded, ExcludedVariablesDescription(),
                      kHelpAfterExcluded);
}

}  // namespace launcher
}  // namespace hvd
