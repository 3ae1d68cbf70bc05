#include "launcher/job_addresses.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/data_plane.h"

namespace hvd {
namespace launcher {

absl::StatusOr<std::string> NamedInterfaceAddress(
    const JobHost& host, const std::vector<std::string>& wanted) {
  for (const std::string& want : wanted) {
    for (const Interface& i : host.hello.interfaces()) {
      if (i.name() == want || i.address() == want) return i.address();
    }
  }
  std::vector<std::string> has;
  for (const Interface& i : host.hello.interfaces()) {
    has.push_back(absl::StrCat(i.name(), " ", i.address()));
  }
  return absl::NotFoundError(absl::StrCat(
      "host ", host.name, " has none of the interfaces ",
      absl::StrJoin(wanted, ","),
      " (it has: ", has.empty() ? "none" : absl::StrJoin(has, ", "), ")"));
}

std::vector<std::string> ProbeCandidates(const JobHost& host) {
  std::vector<std::string> candidates;
  std::set<std::string> mine;
  for (const Interface& i : host.hello.interfaces()) mine.insert(i.address());
  if (mine.count(host.peer_ip)) candidates.push_back(host.peer_ip);
  for (const Interface& i : host.hello.interfaces()) {
    if (i.address() != host.peer_ip) candidates.push_back(i.address());
  }
  return candidates;
}

ProbeRequest MakeProbeRequest(const std::vector<JobHost>& hosts,
                              const std::vector<int>& in_job, int from,
                              absl::Duration timeout) {
  ProbeRequest req;
  req.set_timeout_ms(static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  for (int to : in_job) {
    if (to == from) continue;
    for (const std::string& addr : hosts[to].candidates) {
      ProbeTarget* t = req.add_targets();
      t->set_host_index(to);
      t->set_address(addr);
      t->set_port(hosts[to].hello.probe_port());
      t->set_nonce(hosts[to].hello.probe_nonce());
    }
  }
  return req;
}

absl::StatusOr<std::optional<std::vector<std::string>>> ChooseFromProbes(
    const std::vector<JobHost>& hosts, const std::vector<int>& in_job,
    bool final) {
  // SelectDataPlaneAddresses numbers the hosts densely: 0..in_job.size()-1.
  std::map<int, int> dense;
  for (size_t i = 0; i < in_job.size(); ++i) {
    dense[in_job[i]] = static_cast<int>(i);
  }
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> candidates;
  std::vector<std::map<int, std::map<std::string, bool>>> reached;
  for (int h : in_job) {
    names.push_back(hosts[h].name);
    candidates.push_back(hosts[h].candidates);
    std::map<int, std::map<std::string, bool>> r;
    for (const auto& [to, addrs] : hosts[h].reached) {
      if (dense.count(to)) r[dense[to]] = addrs;
    }
    reached.push_back(std::move(r));
  }
  return SelectDataPlaneAddresses(names, candidates, reached, final);
}

}  // namespace launcher
}  // namespace hvd
