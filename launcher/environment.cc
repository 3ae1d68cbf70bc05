#include "launcher/environment.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/common/config_names.h"
#include "host/worker_environment.h"

namespace hvd {
namespace launcher {
namespace {

// Whole names that belong to one host or session.
constexpr const char* kExcludedNames[] = {
    "HOSTNAME", "HOST",  "PWD",         "OLDPWD",          "SHLVL",
    "_",        "DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR", "XDG_SEAT",
    "XDG_VTNR", "DBUS_SESSION_BUS_ADDRESS", "TMUX",   "TMUX_PANE",
    "STY",      "WINDOW", "WINDOWID",    "KRB5CCNAME",      "TERMCAP",
};
// Prefixes of names that do.
constexpr const char* kExcludedPrefixes[] = {"SSH_", "XDG_SESSION_",
                                             "BASH_FUNC_"};

namespace names = config_names;
using host::IsIdentityVariable;
using host::SetBothSpellings;

}  // namespace

bool IsValidVariableName(absl::string_view name) {
  if (name.empty()) return false;
  if (!absl::ascii_isalpha(name[0]) && name[0] != '_') return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

bool IsExcludedVariable(absl::string_view name) {
  for (const char* n : kExcludedNames) {
    if (name == n) return true;
  }
  for (const char* p : kExcludedPrefixes) {
    if (absl::StartsWith(name, p)) return true;
  }
  return IsIdentityVariable(name);
}

std::string ExcludedVariablesDescription() {
  std::vector<std::string> parts;
  for (const char* n : kExcludedNames) parts.emplace_back(n);
  for (const char* p : kExcludedPrefixes) parts.push_back(absl::StrCat(p, "*"));
  return absl::StrCat(absl::StrJoin(parts, ", "),
                      "; and hvd's per-worker HVD_/HOROVOD_ RANK, SIZE, "
                      "LOCAL_RANK, LOCAL_SIZE, CROSS_RANK, CROSS_SIZE, "
                      "HOSTNAME, RENDEZVOUS_ADDR, JOB_TOKEN, IFACE");
}

std::map<std::string, std::string> ForwardedEnvironment(
    const std::vector<std::string>& env, const std::vector<std::string>& x) {
  std::map<std::string, std::string> all, out;
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    all.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const auto& [name, value] : all) {
    if (!IsExcludedVariable(name)) out[name] = value;
  }
  for (const std::string& entry : x) {
    size_t eq = entry.find('=');
    if (eq != std::string::npos) {
      out[entry.substr(0, eq)] = entry.substr(eq + 1);
    } else if (auto it = all.find(entry); it != all.end()) {
      out[entry] = it->second;
    }
  }
  return out;
}

namespace {

// The value of NAME in "NAME=VALUE" entries (the last one); nullopt if none.
std::optional<std::string> Lookup(const std::vector<std::string>& entries,
                                  absl::string_view name) {
  std::optional<std::string> found;
  for (const std::string& kv : entries) {
    if (kv.size() > name.size() && kv[name.size()] == '=' &&
        absl::StartsWith(kv, name)) {
      found = kv.substr(name.size() + 1);
    }
  }
  return found;
}

// The interfaces HVD_IFACE/HOROVOD_IFACE name for hvdrun, and where from.
std::optional<std::pair<std::string, std::string>> InterfaceVariable(
    const std::vector<std::string>& env, const Options& o) {
  const bool in_worker =
      Lookup(env, absl::StrCat(names::kPrefix, names::kRank)).has_value();
  for (const char* prefix : {names::kPrefix, names::kHorovodPrefix}) {
    const std::string name = absl::StrCat(prefix, names::kIface);
    if (auto v = Lookup(o.env, name)) return std::make_pair(name, *v);
    const bool forwarded =
        std::find(o.env.begin(), o.env.end(), name) != o.env.end();
    if (forwarded || !in_worker) {
      if (auto v = Lookup(env, name); v && !v->empty()) {
        return std::make_pair(name, *v);
      }
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status ApplyIdentityVariables(const std::vector<std::string>& env,
                                    Options* o) {
  for (const std::string& x : o->env) {
    const std::string name = x.substr(0, x.find('='));
    if (host::IsIdentityVariable(name) &&
        !absl::EndsWith(name, absl::StrCat("_", names::kIface))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-x ", name, ": hvdrun sets ", name,
          " for each worker itself; it cannot be forwarded"));
    }
  }
  auto iface = InterfaceVariable(env, *o);
  if (!iface) return absl::OkStatus();
  const auto& [name, value] = *iface;
  std::vector<std::string> named;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    named.emplace_back(absl::StripAsciiWhitespace(part));
  }
  if (!o->network_interfaces.empty() && o->network_interfaces != named) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "=", value, " and --network-interfaces ",
        absl::StrJoin(o->network_interfaces, ","),
        " disagree: give the data-plane interfaces once"));
  }
  o->network_interfaces = std::move(named);
  return absl::OkStatus();
}

namespace {

// A --x/--no-x pair's value, as 1 or 0; nothing if neither was given.
void SetSwitch(std::map<std::string, std::string>& env, const char* name,
               std::optional<bool> value) {
  if (value.has_value()) SetBothSpellings(env, name, *value ? "1" : "0");
}

}  // namespace

std::map<std::string, std::string> TunableEnvironment(const Options& o) {
  std::map<std::string, std::string> env;
  if (o.fusion_threshold_mb.has_value()) {
    SetBothSpellings(env, names::kFusionThreshold,
            absl::StrCat(static_cast<int64_t>(
                std::llround(*o.fusion_threshold_mb * 1024 * 1024))));
  }
  if (o.cycle_time_ms.has_value()) {
    SetBothSpellings(env, names::kCycleTime, absl::StrCat(*o.cycle_time_ms));
  }
  if (o.cache_capacity.has_value()) {
    SetBothSpellings(env, names::kCacheCapacity, absl::StrCat(*o.cache_capacity));
  }
  if (!o.timeline_filename.empty()) {
    SetBothSpellings(env, names::kTimeline, o.timeline_filename);
  }
  SetSwitch(env, names::kStallCheckDisable, o.no_stall_check);
  SetSwitch(env, names::kHierarchicalAllreduce, o.hierarchical_allreduce);
  SetSwitch(env, names::kHierarchicalAllgather, o.hierarchical_allgather);
  SetSwitch(env, names::kTimelineMarkCycles, o.timeline_mark_cycles);
  SetSwitch(env, names::kLogHideTime, o.log_hide_timestamp);
  if (o.timeout_seconds.has_value()) {
    SetBothSpellings(env, names::kTimeoutSeconds,
                     absl::StrCat(*o.timeout_seconds));
  }
  if (o.nccl_ib_disable) env.emplace("NCCL_IB_DISABLE", "1");
  SetSwitch(env, names::kAutotune, o.autotune);
  if (!o.autotune_log_file.empty()) {
    SetBothSpellings(env, names::kAutotuneLog, o.autotune_log_file);
  }
  for (const auto& [name, value] :
       {std::pair{names::kAutotuneWarmupSamples, o.autotune_warmup_samples},
        std::pair{names::kAutotuneStepsPerSample, o.autotune_steps_per_sample},
        std::pair{names::kAutotuneMaxSamples, o.autotune_max_samples}}) {
    if (value.has_value()) SetBothSpellings(env, name, absl::StrCat(*value));
  }
  if (o.autotune_noise.has_value()) {
    SetBothSpellings(env, names::kAutotuneNoise,
                     absl::StrCat(*o.autotune_noise));
  }
  if (o.metrics_port.has_value()) {
    // Every 2 s: a scrape every 15 s (Prometheus' default) sees fresh
    // figures; the page refreshes every 2 s.
    env[absl::StrCat(names::kPrefix, names::kMetricsInterval)] = "2";
  }
  if (o.stall_check_warning_time_seconds.has_value()) {
    SetBothSpellings(env, names::kStallCheckTimeSeconds,
            absl::StrCat(*o.stall_check_warning_time_seconds));
  }
  if (o.stall_check_shutdown_time_seconds.has_value()) {
    SetBothSpellings(env, names::kStallShutdownTimeSeconds,
            absl::StrCat(*o.stall_check_shutdown_time_seconds));
  }
  if (!o.log_level.empty()) SetBothSpellings(env, names::kLogLevel, o.log_level);
  if (!o.transport.empty()) SetBothSpellings(env, names::kTransport, o.transport);
  return env;
}

}  // namespace launcher
}  // namespace hvd
