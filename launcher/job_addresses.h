// Choosing each host's data-plane address for a job: by the interfaces
// --network-interfaces names, or by having every host probe the others'
// candidate addresses and taking, for each host, one every other host
// reached (launcher/data_plane.h decides from the results).
//
// Pure functions over the job's host table (launcher/job_host.h); the job
// calls them under its lock.
#ifndef HVD_LAUNCHER_JOB_ADDRESSES_H_
#define HVD_LAUNCHER_JOB_ADDRESSES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launcher/job_host.h"
#include "proto/launcher.pb.h"

namespace hvd {
namespace launcher {

// The address of the first interface of `host` (as its Hello lists them)
// that `wanted` names, by name or by address, trying `wanted` in order.
// NotFound naming the host, `wanted` and the interfaces it has otherwise.
absl::StatusOr<std::string> NamedInterfaceAddress(
    const JobHost& host, const std::vector<std::string>& wanted);

// The addresses the other hosts probe `host` at, preferred first: the one
// its agent connected from (if it is one of its interfaces), then the rest
// of its interfaces in order.
std::vector<std::string> ProbeCandidates(const JobHost& host);

// What host `from` is asked to probe: every candidate of every other host
// of `in_job` (indices into `hosts`), each with that host's probe port and
// nonce, each within `timeout`.
ProbeRequest MakeProbeRequest(const std::vector<JobHost>& hosts,
                              const std::vector<int>& in_job, int from,
                              absl::Duration timeout);

// The data-plane address of each host of `in_job`, in that order, from the
// probe results so far (SelectDataPlaneAddresses over these hosts): nullopt
// while still undecided; with `final`, missing results count as failures.
// FailedPrecondition when some host has no candidate every other reached.
absl::StatusOr<std::optional<std::vector<std::string>>> ChooseFromProbes(
    const std::vector<JobHost>& hosts, const std::vector<int>& in_job,
    bool final);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_ADDRESSES_H_
