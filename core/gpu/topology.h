// Which GPU data path a process set takes, and the rendezvous exchanges that
// decide and set it up. No CUDA here: the members' GPU identities come in as
// strings, the store is the runtime's rendezvous store.
//
// Every member computes the same choice from the same exchanged facts, so
// the members of a set never disagree on the path.
#ifndef HVD_CORE_GPU_TOPOLOGY_H_
#define HVD_CORE_GPU_TOPOLOGY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/rendezvous/store.h"
#include "core/runtime/config.h"

namespace hvd::gpu {

// HVD_GPU_DATA_PATH: auto (default), nccl, staged (parsed into Config).
using PathPolicy = runtime::GpuDataPath;
absl::string_view PathPolicyName(PathPolicy policy);

struct MemberInfo {
  std::string host;  // HVD_HOSTNAME
  std::string gpu;   // Device::Identity(); "" if unknown
};

struct PathOptions {
  PathPolicy policy = PathPolicy::kAuto;
  bool hierarchical = false;  // HVD_HIERARCHICAL_ALLREDUCE
  bool nccl_available = true;
};

struct PathChoice {
  bool nccl = false;  // else staged (pinned host + CPU data plane)
  // Hierarchical allreduce: NCCL among `local` (the set's members on this
  // host), the CPU data plane among `cross` (the members at this member's
  // position on every host); both are set indexes, ascending, and contain
  // `index`.
  bool hierarchical = false;
  std::vector<int> local;
  std::vector<int> cross;
  int host_index = 0;  // this host's position among the set's hosts
  std::string reason;  // why, for the log
};

// InvalidArgument if `members` is empty or `index` out of range;
// FailedPrecondition when HVD_GPU_DATA_PATH=nccl cannot be honoured (no NCCL,
// or two members share a GPU), naming the members and the GPU.
absl::StatusOr<PathChoice> ChoosePath(const std::vector<MemberInfo>& members,
                                      int index, const PathOptions& options);

// Every member of a set of `size` publishes `mine` under `prefix`; member 0
// collects them all and publishes the list, which the others read (one read
// each, not `size`). Returns every member's info in index order.
// DeadlineExceeded naming the missing member after `timeout`.
absl::StatusOr<std::vector<MemberInfo>> ExchangeMemberInfo(
    Store* store, const std::string& prefix, int index, int size,
    const MemberInfo& mine, absl::Duration timeout);

// The root makes a value with `make` (an NCCL unique id) and publishes it
// under `key` (hex-encoded, so any bytes pass); the others read it. Returns
// the value on every member. `store` may be null when the root is alone.
absl::StatusOr<std::string> ShareFromRoot(
    Store* store, const std::string& key, bool is_root,
    const std::function<absl::StatusOr<std::string>()>& make,
    absl::Duration timeout);

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_TOPOLOGY_H_
