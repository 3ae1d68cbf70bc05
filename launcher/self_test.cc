#include "launcher/self_test.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/hosts.h"

namespace hvd {
namespace launcher {

absl::Status PrepareSelfTest(Options* o, const std::string& worker) {
  if (!o->command.empty()) {
    return absl::InvalidArgumentError(
        "--self-test runs its own workers: give no command");
  }
  if (o->num_proc.has_value()) {
    return absl::InvalidArgumentError(
        "--self-test runs one rank per host: give the hosts (-H or "
        "--hostfile), not -np");
  }
  absl::StatusOr<std::vector<HostSlots>> hosts =
      !o->hostfile.empty() ? ReadHostfile(o->hostfile)
      : !o->hosts.empty()  ? ParseHostList(o->hosts)
                           : ParseHostList("localhost");
  if (!hosts.ok()) return hosts.status();
  std::vector<std::string> one_each;
  for (const HostSlots& h : *hosts) one_each.push_back(absl::StrCat(h.name, ":1"));
  o->hosts = absl::StrJoin(one_each, ",");
  o->hostfile.clear();
  o->num_proc = static_cast<int>(one_each.size());
  o->command = {worker, "--threshold",
                absl::StrCat(o->self_test_threshold.value_or(0.7)), "--bytes",
                absl::StrCat(int64_t{o->self_test_mb.value_or(16)} << 20)};
  return absl::OkStatus();
}

}  // namespace launcher
}  // namespace hvd
