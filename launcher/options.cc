// Why a small hand-written parser and not absl flags or Boost.Program_options:
// hvdrun must stop at the first argument that is not a flag (the rest is the
// user's command, with its own flags), and must accept Horovod's single-dash
// long flags (`-np`, `-hostfile`). absl flags are process-global and keep
// parsing flags after positional arguments; Boost.Program_options needs a
// custom style parser for both. A table of flags (flag_table.h) and one loop
// does it, with errors worded for this tool.
#include "launcher/options.h"

#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "launcher/config_file.h"
#include "launcher/flag_table.h"

namespace hvd {
namespace launcher {
namespace {

using internal::Flag;
using internal::FindFlag;

// Applies `flag` once more; `given` holds the dests already set.
absl::Status Apply(const Flag& flag, absl::string_view name,
                   const std::vector<std::string>& values, Options& o,
                   std::set<std::string>& given) {
  // Any flag but -x and the interface list given twice (or with its --no-
  // form) is probably a mistake in a generated script, and silently taking
  // the last would hide it.
  if (!given.insert(flag.Dest()).second && !flag.repeatable) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", name, " given more than once"));
  }
  return flag.set(o, values);
}

// Reads one flag at args[*i] (and its values, moving *i past them).
absl::Status ParseFlag(const std::vector<std::string>& args, size_t* i,
                       Options& o, std::set<std::string>& given) {
  absl::string_view name = args[*i];
  std::vector<std::string> values;
  size_t eq = name.find('=');
  if (eq != absl::string_view::npos) {
    values.emplace_back(name.substr(eq + 1));
    name = name.substr(0, eq);
  }
  const Flag* flag = FindFlag(name);
  if (flag == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flag '", name, "'"));
  }
  if (flag->arity == 0 && !values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", name, " takes no value"));
  }
  if (flag->arity == 2 && !values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", name, " takes two values, given as ", name,
                     " MIN MAX"));
  }
  while (values.size() < static_cast<size_t>(flag->arity)) {
    if (*i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag ", name, flag->arity == 1 ? " needs a value" : " needs two values"));
    }
    values.push_back(args[++*i]);
  }
  return Apply(*flag, name, values, o, given);
}

// The config file's settings, for what the command line did not set.
absl::Status ApplyConfigFile(Options& o, std::set<std::string>& given) {
  absl::StatusOr<std::vector<ConfigSetting>> settings =
      ReadConfigFile(o.config_file, &o.notes);
  if (!settings.ok()) return settings.status();
  const std::set<std::string> on_command_line = given;
  for (const ConfigSetting& c : *settings) {
    const Flag* flag = FindFlag(c.flag);
    if (flag == nullptr || on_command_line.count(flag->Dest())) continue;
    absl::Status s = Apply(*flag, c.flag, c.values, o, given);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--config-file ", o.config_file, ": ", c.key, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

bool ElasticRequested(const ElasticOptions& e) {
  return e.min_np.has_value() || !e.host_discovery_script.empty();
}

// Notes for what was given and means nothing in this job.
void AddNotes(Options& o) {
  const ElasticOptions& e = o.elastic;
  if (!ElasticRequested(e) &&
      (e.max_np || e.slots_per_host || e.elastic_timeout_s || e.reset_limit ||
       e.cooldown_min_s)) {
    o.notes.push_back(
        "--max-np, --slots-per-host, --elastic-timeout, --reset-limit and "
        "--blacklist-cooldown-range apply to elastic jobs (--min-np or "
        "--host-discovery-script) only; ignored");
  }
}

// An elastic job's flags, against each other and the rest.
absl::Status ValidateElastic(const Options& o) {
  const ElasticOptions& e = o.elastic;
  if (o.rendezvous_only) {
    return absl::InvalidArgumentError(
        "--rendezvous-only cannot run an elastic job (--min-np, "
        "--host-discovery-script): hvdrun must start the workers itself");
  }
  const bool script = !e.host_discovery_script.empty();
  if (script && (!o.hosts.empty() || !o.hostfile.empty())) {
    return absl::InvalidArgumentError(
        "give --host-discovery-script or -H/--hostfile, not both");
  }
  if (!script && o.hosts.empty() && o.hostfile.empty()) {
    return absl::InvalidArgumentError(
        "--min-np needs hosts: -H, --hostfile or --host-discovery-script");
  }
  const int np = o.num_proc.value_or(e.min_np.value_or(1));
  const int min_np = e.min_np.value_or(np);
  if (e.max_np.has_value() && min_np > *e.max_np) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min-np ", min_np, " is larger than --max-np ", *e.max_np));
  }
  if (min_np > np) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-np ", min_np, " is larger than -np ", np));
  }
  if (e.max_np.has_value() && np > *e.max_np) {
    return absl::InvalidArgumentError(
        absl::StrCat("-np ", np, " is larger than --max-np ", *e.max_np));
  }
  if (script && access(e.host_discovery_script.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host-discovery-script ", e.host_discovery_script, ": ",
        access(e.host_discovery_script.c_str(), F_OK) != 0
            ? "no such file"
            : "not executable (chmod +x it)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Options> ParseCommandLine(const std::vector<std::string>& args) {
  Options o;
  std::set<std::string> given;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    // "-" alone, or anything not starting with '-', begins the command.
    if (arg.size() < 2 || arg[0] != '-') break;
    absl::Status s = ParseFlag(args, &i, o, given);
    if (!s.ok()) return s;
  }
  o.command.assign(args.begin() + static_cast<long>(i), args.end());
  if (!o.config_file.empty()) {
    absl::Status s = ApplyConfigFile(o, given);
    if (!s.ok()) return s;
  }
  AddNotes(o);
  return o;
}

bool IsElastic(const Options& o) { return ElasticRequested(o.elastic); }

// The launch tree is hvdrun's, over ssh, for the hosts it knows at start.
absl::Status ValidateLaunchFanout(const Options& o) {
  if (!o.launch_fanout.has_value()) return absl::OkStatus();
  if (o.rendezvous_only) {
    return absl::InvalidArgumentError(
        "--launch-fanout is for jobs hvdrun launches; with --rendezvous-only "
        "the agents join by themselves: drop it");
  }
  if (o.slurm.has_value()) {
    return absl::InvalidArgumentError(
        "--launch-fanout is for agents started over ssh; in a Slurm "
        "allocation srun starts them (and fans out itself): drop it");
  }
  if (ElasticRequested(o.elastic)) {
    return absl::InvalidArgumentError(
        "--launch-fanout does not apply to an elastic job: hvdrun starts "
        "each host's agent itself as the host appears; drop it");
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const Options& o) {
  if (o.help || o.version || o.check_build) return absl::OkStatus();
  if (ElasticRequested(o.elastic)) {
    if (absl::Status s = ValidateElastic(o); !s.ok()) return s;
  }
  if (!o.hosts.empty() && !o.hostfile.empty()) {
    return absl::InvalidArgumentError(
        "-H/--hosts and --hostfile cannot be used together");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both");
  }
  if (o.no_tls && !o.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--no-tls and --tls-cert contradict each other: give one");
  }
  if (absl::Status s = ValidateLaunchFanout(o); !s.ok()) return s;
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
  if (!o.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert/--tls-key are for --rendezvous-only: a launched job makes "
        "its own certificates");
  }
  if (!o.num_proc.has_value() && o.hosts.empty() && o.hostfile.empty() &&
      !o.slurm.has_value()) {
    return absl::InvalidArgumentError(
        "-np is required (or -H/--hostfile to take np from their slots, or a "
        "Slurm allocation to run in)");
  }
  if (o.command.empty()) {
    return absl::InvalidArgumentError(
        "no command given: usage is hvdrun [flags] command [args...]");
  }
  return absl::OkStatus();
}

}  // namespace launcher
}  // namespace hvd
