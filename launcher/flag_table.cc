#include "launcher/flag_table.h"

#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "launcher/environment.h"

namespace hvd {
namespace launcher {
namespace internal {
namespace {

using Values = std::vector<std::string>;

absl::Status BadValue(absl::string_view flag, absl::string_view value,
                      absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid value '", value, "' for ", flag, ": expected ", want));
}

// A setter of one value.
Setter One(std::function<absl::Status(Options&, const std::string&)> set) {
  return [set](Options& o, const Values& v) { return set(o, v.at(0)); };
}

absl::Status ParseInt(const std::string& v, const char* flag, int min,
                      int max, int* n) {
  if (absl::SimpleAtoi(v, n) && *n >= min && *n <= max) {
    return absl::OkStatus();
  }
  if (max != std::numeric_limits<int>::max()) {
    return BadValue(flag, v, absl::StrCat("an integer from ", min, " to ", max));
  }
  return BadValue(flag, v,
                  min > 0 ? "a positive integer" : "a non-negative integer");
}

// An integer from `min` to `max`.
template <typename Field>
Setter Int(Field field, const char* flag, int min,
           int max = std::numeric_limits<int>::max()) {
  return One([=](Options& o, const std::string& v) -> absl::Status {
    int n;
    absl::Status s = ParseInt(v, flag, min, max, &n);
    if (s.ok()) field(o) = n;
    return s;
  });
}

Setter Int(std::optional<int> Options::*field, const char* flag, int min,
           int max = std::numeric_limits<int>::max()) {
  return Int([field](Options& o) -> auto& { return o.*field; }, flag, min,
             max);
}

// An ElasticOptions field, as a positive integer.
Setter Elastic(std::optional<int> ElasticOptions::*field, const char* flag) {
  return Int([field](Options& o) -> auto& { return o.elastic.*field; }, flag,
             1);
}

Setter Double(std::optional<double> Options::*field, const char* flag) {
  return One([=](Options& o, const std::string& v) -> absl::Status {
    double d;
    if (!absl::SimpleAtod(v, &d) || !(d >= 0)) {
      return BadValue(flag, v, "a non-negative number");
    }
    o.*field = d;
    return absl::OkStatus();
  });
}

Setter String(std::string Options::*field) {
  return One([=](Options& o, const std::string& v) {
    o.*field = v;
    return absl::OkStatus();
  });
}

Setter Seconds(absl::Duration Options::*field, const char* flag) {
  return One([=](Options& o, const std::string& v) -> absl::Status {
    double d;
    if (!absl::SimpleAtod(v, &d) || !(d > 0)) {
      return BadValue(flag, v, "a positive number of seconds");
    }
    o.*field = absl::Seconds(d);
    return absl::OkStatus();
  });
}

Setter True(bool Options::*field) {
  return [=](Options& o, const Values&) {
    o.*field = true;
    return absl::OkStatus();
  };
}

// One of a --x/--no-x pair: sets `field` to `value`.
Setter Switch(std::optional<bool> Options::*field, bool value) {
  return [=](Options& o, const Values&) {
    o.*field = value;
    return absl::OkStatus();
  };
}

// A horovodrun flag that means nothing here: a note saying why.
Setter Ignored(std::string why) {
  return [why](Options& o, const Values& v) {
    std::string note = why;
    if (!v.empty()) note = absl::StrCat(why, " (", absl::StrJoin(v, " "), ")");
    o.notes.push_back(absl::StrCat(note, "; ignored"));
    return absl::OkStatus();
  };
}

absl::Status SetInterfaces(Options& o, const std::string& v) {
  for (absl::string_view s : absl::StrSplit(v, ',')) {
    s = absl::StripAsciiWhitespace(s);
    if (s.empty()) {
      return BadValue("--network-interfaces", v,
                      "a comma-separated list of interface names");
    }
    // Given again (Horovod's repeated --network-interface): the union.
    bool known = false;
    for (const std::string& have : o.network_interfaces) known |= have == s;
    if (!known) o.network_interfaces.emplace_back(s);
  }
  return absl::OkStatus();
}

absl::Status SetStartTimeout(Options& o, const std::string& v) {
  absl::Status status =
      Seconds(&Options::start_timeout, "--start-timeout")(o, {v});
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

absl::Status SetBindTo(Options& o, const std::string& v) {
  const std::string lower = absl::AsciiStrToLower(v);
  if (lower != "cores" && lower != "none") {
    return BadValue("--bind-to", v, "cores or none");
  }
  o.bind_to = lower;
  return absl::OkStatus();
}

absl::Status SetTransport(Options& o, const std::string& v) {
  const std::string lower = absl::AsciiStrToLower(v);
  if (lower != "auto" && lower != "rdma" && lower != "tcp") {
    return BadValue("--transport", v, "one of auto, rdma, tcp");
  }
  if (!o.transport.empty() && o.transport != lower) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--transport ", lower, " and --tcp disagree: give one of them"));
  }
  o.transport = lower;
  return absl::OkStatus();
}

// Horovod's --tcp: TCP only, for hvd's data plane and NCCL's.
absl::Status SetTcp(Options& o, const Values&) {
  if (!o.transport.empty() && o.transport != "tcp") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tcp and --transport ", o.transport, " disagree: give one of them"));
  }
  o.transport = "tcp";
  o.nccl_ib_disable = true;
  o.notes.push_back(
      "--tcp: hvd has one controller; this runs its data plane over TCP "
      "(--transport tcp) and sets NCCL_IB_DISABLE=1");
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

// --blacklist-cooldown-range MIN MAX, in seconds.
absl::Status SetCooldown(Options& o, const Values& v) {
  const char* flag = "--blacklist-cooldown-range";
  int lo, hi;
  absl::Status s = ParseInt(v.at(0), flag, 1, 3600, &lo);
  if (s.ok()) s = ParseInt(v.at(1), flag, 1, 3600, &hi);
  if (!s.ok()) return s;
  if (lo > hi) {
    return BadValue(flag, absl::StrCat(lo, " ", hi), "MIN no larger than MAX");
  }
  o.elastic.cooldown_min_s = lo;
  o.elastic.cooldown_max_s = hi;
  return absl::OkStatus();
}

Flag F(std::vector<std::string> names, int arity, Setter set,
       std::string dest = "") {
  return Flag{std::move(names), arity, std::move(set), std::move(dest)};
}

Flag Repeatable(Flag f) {
  f.repeatable = true;
  return f;
}

constexpr char kOneController[] =
    "hvd has one controller (its own: a gRPC rendezvous, then TCP and "
    "shared memory)";
constexpr char kNoMpi[] = "hvd does not use MPI";

std::vector<Flag> HvdFlags() {
  return {
      F({"-np", "--np", "--num-proc"}, 1, Int(&Options::num_proc, "-np", 1)),
      F({"-H", "--hosts"}, 1, String(&Options::hosts)),
      F({"--hostfile", "-hostfile"}, 1, String(&Options::hostfile)),
      F({"-p", "--ssh-port"}, 1,
        Int(&Options::ssh_port, "--ssh-port", 1, 65535)),
      F({"-i", "--ssh-identity-file"}, 1, String(&Options::ssh_identity_file)),
      F({"--ssh-config-file"}, 1, String(&Options::ssh_config_file)),
      F({"--launch-fanout"}, 1,
        Int(&Options::launch_fanout, "--launch-fanout", 1, 1 << 20)),
      Repeatable(F({"--network-interfaces", "--network-interface"}, 1,
                   One(SetInterfaces))),
      F({"--start-timeout"}, 1, One(SetStartTimeout)),
      F({"--output-filename"}, 1, String(&Options::output_filename)),
      F({"--prefix-output-with-timestamp", "-prefix-timestamp"}, 0,
        True(&Options::prefix_output_with_timestamp)),
      F({"--verbose"}, 0, True(&Options::verbose)),
      F({"--log-level"}, 1, One(SetLogLevel)),
      F({"--transport"}, 1, One(SetTransport)),
      F({"--bind-to"}, 1, One(SetBindTo)),
      Repeatable(F({"-x", "--env"}, 1, One(SetEnv))),
      F({"--config-file"}, 1, String(&Options::config_file)),
      F({"--version", "-v"}, 0, True(&Options::version)),
      F({"-h", "--help"}, 0, True(&Options::help)),
      F({"-cb", "--check-build"}, 0, True(&Options::check_build)),
      F({"--self-test"}, 0, True(&Options::self_test)),
      F({"--self-test-mb"}, 1,
        Int(&Options::self_test_mb, "--self-test-mb", 1, 4096)),
      F({"--self-test-threshold"}, 1,
        One([](Options& o, const std::string& v) -> absl::Status {
          double f;
          if (!absl::SimpleAtod(v, &f) || !(f > 0 && f <= 1)) {
            return BadValue("--self-test-threshold", v,
                            "a fraction of the best pair, above 0 and at "
                            "most 1");
          }
          o.self_test_threshold = f;
          return absl::OkStatus();
        })),
      F({"--metrics-port"}, 1,
        Int(&Options::metrics_port, "--metrics-port", 1, 65535)),
      F({"--metrics-linger-seconds"}, 1,
        Seconds(&Options::metrics_linger, "--metrics-linger-seconds")),
      F({"--agent-path"}, 1, String(&Options::agent_path)),
      F({"--kill-grace-seconds"}, 1,
        Seconds(&Options::kill_grace, "--kill-grace-seconds")),
      F({"--rendezvous-only"}, 0, True(&Options::rendezvous_only)),
      F({"--port"}, 1, Int(&Options::port, "--port", 0, 65535)),
      F({"--rendezvous-file"}, 1, String(&Options::rendezvous_file)),
      F({"--no-tls"}, 0, True(&Options::no_tls)),
      F({"--tls-cert"}, 1, String(&Options::tls_cert)),
      F({"--tls-key"}, 1, String(&Options::tls_key)),
  };
}

std::vector<Flag> TunableFlags() {
  using O = Options;
  return {
      F({"--fusion-threshold-mb"}, 1,
        Double(&O::fusion_threshold_mb, "--fusion-threshold-mb")),
      F({"--cycle-time-ms"}, 1, Double(&O::cycle_time_ms, "--cycle-time-ms")),
      F({"--cache-capacity"}, 1,
        Int(&O::cache_capacity, "--cache-capacity", 0)),
      F({"--timeline-filename"}, 1, String(&O::timeline_filename)),
      F({"--timeline-mark-cycles"}, 0, Switch(&O::timeline_mark_cycles, true),
        "mark-cycles"),
      F({"--no-timeline-mark-cycles"}, 0,
        Switch(&O::timeline_mark_cycles, false), "mark-cycles"),
      F({"--no-stall-check"}, 0, Switch(&O::no_stall_check, true), "stall"),
      F({"--stall-check"}, 0, Switch(&O::no_stall_check, false), "stall"),
      F({"--stall-check-warning-time-seconds"}, 1,
        Int(&O::stall_check_warning_time_seconds,
            "--stall-check-warning-time-seconds", 0)),
      F({"--stall-check-shutdown-time-seconds"}, 1,
        Int(&O::stall_check_shutdown_time_seconds,
            "--stall-check-shutdown-time-seconds", 0)),
      F({"--hierarchical-allreduce"}, 0,
        Switch(&O::hierarchical_allreduce, true), "h-allreduce"),
      F({"--no-hierarchical-allreduce"}, 0,
        Switch(&O::hierarchical_allreduce, false), "h-allreduce"),
      F({"--hierarchical-allgather"}, 0,
        Switch(&O::hierarchical_allgather, true), "h-allgather"),
      F({"--no-hierarchical-allgather"}, 0,
        Switch(&O::hierarchical_allgather, false), "h-allgather"),
      F({"--gloo-timeout-seconds"}, 1,
        Int(&O::timeout_seconds, "--gloo-timeout-seconds", 1)),
      F({"--autotune"}, 0, Switch(&O::autotune, true), "autotune"),
      F({"--no-autotune"}, 0, Switch(&O::autotune, false), "autotune"),
      F({"--autotune-log-file"}, 1, String(&O::autotune_log_file)),
      F({"--autotune-warmup-samples"}, 1,
        Int(&O::autotune_warmup_samples, "--autotune-warmup-samples", 0)),
      F({"--autotune-steps-per-sample"}, 1,
        Int(&O::autotune_steps_per_sample, "--autotune-steps-per-sample", 1)),
      F({"--autotune-bayes-opt-max-samples"}, 1,
        Int(&O::autotune_max_samples, "--autotune-bayes-opt-max-samples", 1)),
      F({"--autotune-gaussian-process-noise"}, 1,
        Double(&O::autotune_noise, "--autotune-gaussian-process-noise")),
      F({"--log-with-timestamp", "--no-log-hide-timestamp"}, 0,
        Switch(&O::log_hide_timestamp, false), "log-time"),
      F({"--log-without-timestamp", "--log-hide-timestamp"}, 0,
        Switch(&O::log_hide_timestamp, true), "log-time"),
  };
}

std::vector<Flag> ElasticFlags() {
  using E = ElasticOptions;
  return {
      F({"--min-np", "--min-num-proc"}, 1, Elastic(&E::min_np, "--min-np")),
      F({"--max-np", "--max-num-proc"}, 1, Elastic(&E::max_np, "--max-np")),
      F({"--slots-per-host"}, 1,
        Elastic(&E::slots_per_host, "--slots-per-host")),
      F({"--elastic-timeout"}, 1,
        Elastic(&E::elastic_timeout_s, "--elastic-timeout")),
      F({"--reset-limit"}, 1,
        Int([](Options& o) -> auto& { return o.elastic.reset_limit; },
            "--reset-limit", 0)),
      F({"--blacklist-cooldown-range"}, 2, SetCooldown),
      F({"--host-discovery-script"}, 1,
        One([](Options& o, const std::string& v) {
          o.elastic.host_discovery_script = v;
          return absl::OkStatus();
        })),
  };
}

// horovodrun's flags for what hvd does not have. Their --no- forms state
// what is already so, and are accepted without a note.
std::vector<Flag> IgnoredFlags() {
  auto no = [](const char* name, const char* dest) {
    return F({name}, 0, [](Options&, const Values&) {
      return absl::OkStatus();
    }, dest);
  };
  return {
      F({"--gloo"}, 0, Ignored(absl::StrCat("--gloo: ", kOneController)),
        "controller"),
      F({"--mpi"}, 0, Ignored(absl::StrCat("--mpi: ", kOneController)),
        "controller"),
      F({"--jsrun"}, 0,
        Ignored(absl::StrCat("--jsrun: ", kOneController,
                             ", started over ssh or by an orchestrator")),
        "controller"),
      F({"--tcp"}, 0, SetTcp),
      F({"--disable-cache"}, 0,
        Ignored("--disable-cache: hvdrun keeps no cache of start-up checks")),
      F({"--mpi-args"}, 1, Ignored(absl::StrCat("--mpi-args: ", kNoMpi))),
      F({"--binding-args"}, 1,
        Ignored(absl::StrCat("--binding-args: ", kNoMpi))),
      F({"--mpi-threads-disable"}, 0,
        Ignored(absl::StrCat("--mpi-threads-disable: ", kNoMpi)), "mpi-t"),
      no("--no-mpi-threads-disable", "mpi-t"),
      F({"--num-nccl-streams"}, 1,
        Ignored("--num-nccl-streams: hvd runs NCCL on one stream per GPU")),
      F({"--thread-affinity"}, 1,
        Ignored("--thread-affinity: hvd does not pin its threads to cores")),
      F({"--torus-allreduce"}, 0,
        Ignored("--torus-allreduce: hvd has no torus allreduce"), "torus"),
      no("--no-torus-allreduce", "torus"),
  };
}

}  // namespace

const std::vector<Flag>& Flags() {
  static const auto* flags = [] {
    auto* all = new std::vector<Flag>;
    for (auto part : {HvdFlags(), TunableFlags(), ElasticFlags(),
                      IgnoredFlags()}) {
      for (Flag& f : part) all->push_back(std::move(f));
    }
    return all;
  }();
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

}  // namespace internal
}  // namespace launcher
}  // namespace hvd
