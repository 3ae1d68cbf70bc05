#include "core/gpu/topology.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hvd::gpu {
namespace {

// One member per line, "host<TAB>gpu": neither ever holds a tab or newline
// (checked when encoding).
absl::StatusOr<std::string> EncodeOne(const MemberInfo& info) {
  for (const std::string* field : {&info.host, &info.gpu}) {
    if (field->find_first_of("\t\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("host name or GPU identity '", absl::CEscape(*field),
                       "' holds a tab or newline"));
    }
  }
  return absl::StrCat(info.host, "\t", info.gpu);
}

absl::StatusOr<MemberInfo> DecodeOne(absl::string_view line) {
  std::vector<std::string> parts = absl::StrSplit(line, '\t');
  if (parts.size() != 2) {
    return absl::DataLossError(
        absl::StrCat("malformed GPU member info '", absl::CEscape(line), "'"));
  }
  return MemberInfo{parts[0], parts[1]};
}

std::string Describe(const std::vector<int>& indexes) {
  return absl::StrCat("[", absl::StrJoin(indexes, ", "), "]");
}

// Hosts in order of their first member, each with its members ascending.
std::vector<std::pair<std::string, std::vector<int>>> ByHost(
    const std::vector<MemberInfo>& members) {
  std::vector<std::pair<std::string, std::vector<int>>> hosts;
  std::map<std::string, size_t> position;
  for (int i = 0; i < static_cast<int>(members.size()); ++i) {
    auto [it, fresh] = position.emplace(members[i].host, hosts.size());
    if (fresh) hosts.push_back({members[i].host, {}});
    hosts[it->second].second.push_back(i);
  }
  return hosts;
}

// Why hierarchical allreduce does not apply, or "" when it does.
std::string HierarchyProblem(
    const std::vector<std::pair<std::string, std::vector<int>>>& hosts) {
  if (hosts.size() < 2) return "all members are on one host";
  const size_t per_host = hosts[0].second.size();
  for (const auto& [host, indexes] : hosts) {
    if (indexes.size() != per_host) {
      return absl::StrCat("hosts hold different numbers of members (",
                          hosts[0].first, ": ", per_host, ", ", host, ": ",
                          indexes.size(), ")");
    }
  }
  if (per_host == 1) return "one member per host";
  return "";
}

void SetHierarchy(
    const std::vector<std::pair<std::string, std::vector<int>>>& hosts,
    int index, PathChoice& choice) {
  for (size_t h = 0; h < hosts.size(); ++h) {
    const auto& indexes = hosts[h].second;
    for (size_t p = 0; p < indexes.size(); ++p) {
      if (indexes[p] != index) continue;
      choice.host_index = static_cast<int>(h);
      choice.local = indexes;
      for (const auto& other : hosts) choice.cross.push_back(other.second[p]);
    }
  }
  choice.hierarchical = true;
}

}  // namespace

absl::string_view PathPolicyName(PathPolicy policy) {
  switch (policy) {
    case PathPolicy::kAuto:
      return "auto";
    case PathPolicy::kNccl:
      return "nccl";
    case PathPolicy::kStaged:
      return "staged";
  }
  return "?";
}

absl::StatusOr<PathChoice> ChoosePath(const std::vector<MemberInfo>& members,
                                      int index, const PathOptions& options) {
  if (members.empty() || index < 0 ||
      index >= static_cast<int>(members.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "member ", index, " of a set of ", members.size(), " members"));
  }
  PathChoice choice;
  if (options.policy == PathPolicy::kStaged) {
    choice.reason = "HVD_GPU_DATA_PATH=staged";
    return choice;
  }
  if (!options.nccl_available) {
    if (options.policy == PathPolicy::kNccl) {
      return absl::FailedPreconditionError(
          "HVD_GPU_DATA_PATH=nccl but this build has no NCCL");
    }
    choice.reason = "this build has no NCCL";
    return choice;
  }
  // A GPU's identity (its CUDA UUID) names one device wherever it is seen:
  // members under different host names can share it too (two containers
  // given one GPU, two names for one machine), and NCCL refuses that.
  std::map<std::string, int> owner;
  for (int i = 0; i < static_cast<int>(members.size()); ++i) {
    if (members[i].gpu.empty()) continue;
    auto [it, fresh] = owner.emplace(members[i].gpu, i);
    if (fresh) continue;
    const std::string& first_host = members[it->second].host;
    const std::string where =
        first_host == members[i].host
            ? absl::StrCat("on host ", first_host)
            : absl::StrCat("(seen on hosts ", first_host, " and ",
                           members[i].host, ")");
    const std::string shared = absl::StrCat(
        "members ", it->second, " and ", i, " share GPU ", members[i].gpu,
        " ", where, " (NCCL needs one GPU per rank)");
    if (options.policy == PathPolicy::kNccl) {
      return absl::FailedPreconditionError(
          absl::StrCat("HVD_GPU_DATA_PATH=nccl but ", shared));
    }
    choice.reason = shared;
    return choice;
  }
  choice.nccl = true;
  choice.reason = options.policy == PathPolicy::kNccl
                      ? "HVD_GPU_DATA_PATH=nccl"
                      : "every member has a GPU of its own";
  if (!options.hierarchical) return choice;
  const auto hosts = ByHost(members);
  const std::string problem = HierarchyProblem(hosts);
  if (!problem.empty()) {
    absl::StrAppend(&choice.reason, "; hierarchical allreduce off: ", problem);
    return choice;
  }
  SetHierarchy(hosts, index, choice);
  absl::StrAppend(&choice.reason, "; hierarchical allreduce over ",
                  hosts.size(), " hosts of ", choice.local.size(),
                  " members (local ", Describe(choice.local), ", cross ",
                  Describe(choice.cross), ")");
  return choice;
}

absl::StatusOr<std::vector<MemberInfo>> ExchangeMemberInfo(
    Store* store, const std::string& prefix, int index, int size,
    const MemberInfo& mine, absl::Duration timeout) {
  auto encoded = EncodeOne(mine);
  if (!encoded.ok()) return encoded.status();
  if (size == 1) return std::vector<MemberInfo>{mine};
  if (store == nullptr) {
    return absl::FailedPreconditionError(
        "a process set of several members needs the rendezvous store");
  }
  absl::StatusOr<std::string> all = GatherThroughRoot(
      *store, absl::StrCat(prefix, "info/"), index, size, *encoded,
      absl::StrCat("the GPU info of the set's ", size, " members"),
      [](const std::vector<std::string>& lines) {
        return absl::StrJoin(lines, "\n");
      },
      timeout);
  if (!all.ok()) return all.status();
  std::vector<MemberInfo> members;
  for (absl::string_view line : absl::StrSplit(*all, '\n')) {
    auto info = DecodeOne(line);
    if (!info.ok()) return info.status();
    members.push_back(*info);
  }
  if (static_cast<int>(members.size()) != size) {
    return absl::DataLossError(absl::StrCat("GPU info lists ", members.size(),
                                            " members, the set has ", size));
  }
  return members;
}

absl::StatusOr<std::string> ShareFromRoot(
    Store* store, const std::string& key, bool is_root,
    const std::function<absl::StatusOr<std::string>()>& make,
    absl::Duration timeout) {
  if (is_root) {
    auto value = make();
    if (!value.ok()) return value.status();
    if (store != nullptr) {
      if (absl::Status s = store->Set(key, absl::BytesToHexString(*value));
          !s.ok()) {
        return s;
      }
    }
    return value;
  }
  if (store == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no rendezvous store to read '", key, "' from"));
  }
  auto hex = store->Get(key, timeout);
  if (!hex.ok()) return hex.status();
  if (hex->size() % 2 != 0 ||
      hex->find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    return absl::DataLossError(
        absl::StrCat("value under '", key, "' is not hex"));
  }
  return absl::HexStringToBytes(*hex);
}

}  // namespace hvd::gpu
