// Choosing each host's data-plane address from what the hosts' probes of one
// another found: for each host, the first of its candidates every other host
// reached.
#ifndef HVD_LAUNCHER_DATA_PLANE_H_
#define HVD_LAUNCHER_DATA_PLANE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hvd {
namespace launcher {

// Choosing data-plane addresses. candidates[h]: host h's addresses, most
// preferred first. results[from][to][address]: whether host `from` could
// connect to that address of host `to`; a missing entry is not known yet.
//
// For each host, the first candidate every other host reached, skipping
// candidates some host could not reach. Decided as soon as the results known
// allow it: nullopt while a choice still depends on a missing result (with
// `final`, missing results count as failures). FailedPrecondition naming the
// host, its candidates and who could not reach them when no candidate is left.
absl::StatusOr<std::optional<std::vector<std::string>>>
SelectDataPlaneAddresses(
    const std::vector<std::string>& host_names,
    const std::vector<std::vector<std::string>>& candidates,
    const std::vector<std::map<int, std::map<std::string, bool>>>& results,
    bool final);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_DATA_PLANE_H_
