// The job's process sets: id 0 is every rank; others are added and removed
// collectively at run time.
#ifndef HVD_CORE_RUNTIME_PROCESS_SETS_H_
#define HVD_CORE_RUNTIME_PROCESS_SETS_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace hvd::runtime {

// Thread-safe: changed by the background thread, read by framework threads.
// Position of `rank` in `ranks` (ascending, as sets are kept), -1 if it is
// not there.
int PositionIn(const std::vector<int>& ranks, int rank);

class ProcessSetTable {
 public:
  explicit ProcessSetTable(int world_size);

  // A set's ranks, in set order (ascending): shared and never changed (a
  // set that changes is a new list), so a caller reads them without a copy.
  using Members = std::shared_ptr<const std::vector<int>>;

  // Ranks of set `id`, nullptr if no such set.
  Members Ranks(int id) const;
  // Position of `rank` in set `id`, -1 if not a member or no such set.
  int IndexOf(int id, int rank) const;
  std::vector<int> Ids() const;
  // The id a set with exactly `ranks` already has, or -1.
  int Find(const std::vector<int>& ranks) const;
  // True when no set leaves a rank of the job out.
  bool EverySetHasEveryRank() const;

  void Add(int id, std::vector<int> ranks);
  void Remove(int id);

 private:
  mutable absl::Mutex mu_;
  const size_t world_size_;
  std::map<int, Members> sets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_PROCESS_SETS_H_
