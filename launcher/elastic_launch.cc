#include "launcher/elastic_launch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/config_names.h"
#include "core/common/env.h"

namespace hvd {
namespace launcher {

absl::StatusOr<ElasticSettings> ElasticSettingsOf(const Options& o) {
  const ElasticOptions& e = o.elastic;
  ElasticSettings s;
  s.np = o.num_proc.value_or(e.min_np.value_or(1));
  s.min_np = e.min_np.value_or(s.np);
  s.max_np = e.max_np.value_or(0);
  if (e.elastic_timeout_s.has_value()) {
    s.timeout = absl::Seconds(*e.elastic_timeout_s);
  } else {
    absl::StatusOr<int64_t> t =
        GetConfigInt(config_names::kElasticTimeout, 600);
    if (!t.ok()) return t.status();
    if (*t < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HVD_ELASTIC_TIMEOUT must be at least 1 (seconds), not ", *t));
    }
    s.timeout = absl::Seconds(*t);
  }
  s.reset_limit = e.reset_limit;
  if (e.cooldown_min_s.has_value()) {
    s.cooldown_min = absl::Seconds(*e.cooldown_min_s);
    s.cooldown_max = absl::Seconds(*e.cooldown_max_s);
  }
  s.verbose = o.verbose;
  return s;
}

absl::StatusOr<std::unique_ptr<HostDiscovery>> StartHostDiscovery(
    const Options& o, host::Os* os) {
  const ElasticOptions& e = o.elastic;
  if (e.host_discovery_script.empty()) {
    absl::StatusOr<std::vector<HostSlots>> hosts =
        o.hosts.empty() ? ReadHostfile(o.hostfile) : ParseHostList(o.hosts);
    if (!hosts.ok()) return hosts.status();
    return std::make_unique<FixedHostDiscovery>(*std::move(hosts), os->Now());
  }
  ScriptHostDiscovery::Options so;
  so.script = e.host_discovery_script;
  so.env = host::CurrentEnvironment();
  so.default_slots = e.slots_per_host.value_or(1);
  absl::StatusOr<std::vector<HostSlots>> first = RunDiscoveryScript(
      os, so.script, so.env, so.default_slots, so.run_timeout);
  if (!first.ok()) return first.status();
  return std::make_unique<ScriptHostDiscovery>(std::move(so), os,
                                               *std::move(first));
}

}  // namespace launcher
}  // namespace hvd
