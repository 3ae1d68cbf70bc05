#include "host/worker_environment.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/config_names.h"

namespace hvd {
namespace host {
namespace {

namespace names = config_names;

// hvd's identity variables, set per worker (both spellings).
constexpr const char* kIdentityNames[] = {
    names::kRank,       names::kSize,      names::kLocalRank,
    names::kLocalSize,  names::kCrossRank, names::kCrossSize,
    names::kHostname,   names::kRendezvousAddr, names::kJobToken,
    names::kIface,      names::kRendezvousCa,   names::kRendezvousTlsName,
    names::kElasticWorkerId,
};

}  // namespace

bool IsIdentityVariable(absl::string_view name) {
  for (absl::string_view prefix : {names::kPrefix, names::kHorovodPrefix}) {
    if (!absl::StartsWith(name, prefix)) continue;
    absl::string_view rest = name.substr(prefix.size());
    for (const char* id : kIdentityNames) {
      if (rest == id) return true;
    }
  }
  return false;
}

void SetBothSpellings(std::map<std::string, std::string>& env,
                      absl::string_view name, const std::string& value) {
  env[absl::StrCat(names::kPrefix, name)] = value;
  env[absl::StrCat(names::kHorovodPrefix, name)] = value;
}

std::vector<std::string> WorkerEnvironment(
    const std::vector<std::string>& base,
    const std::map<std::string, std::string>& overlay,
    const WorkerIdentity& id) {
  std::map<std::string, std::string> env;
  for (const std::string& kv : base) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    // Identity variables the agent itself inherited (a nested launch) must
    // not survive when this worker's are unset (HVD_IFACE).
    if (IsIdentityVariable(name)) continue;
    env.emplace(std::move(name), kv.substr(eq + 1));
  }
  for (const auto& [name, value] : overlay) {
    if (!IsIdentityVariable(name)) env[name] = value;
  }
  SetBothSpellings(env, names::kRank, absl::StrCat(id.rank));
  SetBothSpellings(env, names::kSize, absl::StrCat(id.size));
  SetBothSpellings(env, names::kLocalRank, absl::StrCat(id.local_rank));
  SetBothSpellings(env, names::kLocalSize, absl::StrCat(id.local_size));
  SetBothSpellings(env, names::kCrossRank, absl::StrCat(id.cross_rank));
  SetBothSpellings(env, names::kCrossSize, absl::StrCat(id.cross_size));
  SetBothSpellings(env, names::kHostname, id.hostname);
  SetBothSpellings(env, names::kRendezvousAddr, id.rendezvous_addr);
  SetBothSpellings(env, names::kJobToken, id.job_token);
  if (!id.iface.empty()) SetBothSpellings(env, names::kIface, id.iface);
  if (!id.elastic_worker_id.empty()) {
    SetBothSpellings(env, names::kElasticWorkerId, id.elastic_worker_id);
  }
  if (!id.rendezvous_ca_pem.empty()) {
    SetBothSpellings(env, names::kRendezvousCa, id.rendezvous_ca_pem);
  }
  if (!id.rendezvous_tls_name.empty()) {
    SetBothSpellings(env, names::kRendezvousTlsName, id.rendezvous_tls_name);
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(absl::StrCat(name, "=", value));
  return out;
}

}  // namespace host
}  // namespace hvd
