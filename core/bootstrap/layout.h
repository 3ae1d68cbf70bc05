// The layout exchange: what the ranks tell each other once at start-up,
// each rank's host and whether it offers RDMA to ranks on other hosts.
#ifndef HVD_CORE_BOOTSTRAP_LAYOUT_H_
#define HVD_CORE_BOOTSTRAP_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/rendezvous/store.h"

namespace hvd::bootstrap {

// What one rank publishes.
struct LayoutRecord {
  std::string host;  // HVD_HOSTNAME: ranks with the same one share a host
  bool rdma = false;  // offers RDMA for ranks on other hosts
};

// What every rank learns.
struct Layout {
  std::vector<int> hosts;  // each rank's host index, in order of appearance
  bool all_rdma = false;   // every rank offers RDMA
};

// Publishes `mine` as rank `rank` of `size` and returns the job's layout.
// Rank 0 reads every rank's record and publishes the layout as one compact
// value (a host index per rank) that the other ranks read: the store
// answers one read of N records and N - 1 reads of one value, not N reads
// of N records each (about 200 MB of answers at 4096 ranks).
//
// Errors name `rank`: DeadlineExceeded when a rank's record or the layout
// does not come within `timeout`; InvalidArgument on every rank when a
// record is unreadable (rank 0 publishes the error in place of the layout);
// the store's error when publishing fails.
absl::StatusOr<Layout> ExchangeLayout(int rank, int size,
                                      const LayoutRecord& mine, Store& store,
                                      absl::Duration timeout);

}  // namespace hvd::bootstrap

#endif  // HVD_CORE_BOOTSTRAP_LAYOUT_H_
