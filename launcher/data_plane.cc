#include "launcher/data_plane.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hvd {
namespace launcher {

absl::StatusOr<std::optional<std::vector<std::string>>>
SelectDataPlaneAddresses(
    const std::vector<std::string>& host_names,
    const std::vector<std::vector<std::string>>& candidates,
    const std::vector<std::map<int, std::map<std::string, bool>>>& results,
    bool final) {
  const int n = static_cast<int>(candidates.size());
  std::vector<std::string> chosen(n);
  bool undecided = false;
  for (int to = 0; to < n; ++to) {
    std::vector<std::string> why;
    for (const std::string& addr : candidates[to]) {
      std::vector<std::string> failed;
      bool unknown = false;
      for (int from = 0; from < n; ++from) {
        if (from == to) continue;
        std::optional<bool> r;
        auto it = results[from].find(to);
        if (it != results[from].end()) {
          auto jt = it->second.find(addr);
          if (jt != it->second.end()) r = jt->second;
        }
        if (!r.has_value() && !final) {
          unknown = true;
        } else if (!r.value_or(false)) {
          failed.push_back(host_names[from]);
        }
      }
      if (!failed.empty()) {
        why.push_back(absl::StrCat(addr, " (not from ",
                                   absl::StrJoin(failed, ", "), ")"));
        continue;
      }
      if (unknown) {
        undecided = true;
      } else {
        chosen[to] = addr;
      }
      break;
    }
    if (chosen[to].empty() && !undecided) {
      return absl::FailedPreconditionError(
          absl::StrCat("host ", host_names[to],
                       ": no address every other host can reach; tried ",
                       why.empty() ? "none (no up non-loopback IPv4 interface)"
                                   : absl::StrJoin(why, ", ")));
    }
  }
  if (undecided) return std::nullopt;
  return chosen;
}

}  // namespace launcher
}  // namespace hvd
