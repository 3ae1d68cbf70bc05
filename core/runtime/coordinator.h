// Rank 0's side of negotiation: collects every rank's requests each cycle,
// decides which tensors are ready on all members of their process set,
// validates them, fuses small allreduces, watches for stalls, and returns the
// responses every rank executes, in order.
#ifndef HVD_CORE_RUNTIME_COORDINATOR_H_
#define HVD_CORE_RUNTIME_COORDINATOR_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/runtime/process_sets.h"
#include "core/runtime/response_cache.h"
#include "core/runtime/timeline.h"
#include "proto/negotiation.pb.h"

namespace hvd::runtime {

// How a stall shutdown's reason starts (the shutdown a coordinator orders
// when a tensor waits past HVD_STALL_SHUTDOWN_TIME_SECONDS).
inline constexpr char kStallShutdownPrefix[] = "stall shutdown: ";

struct CoordinatorOptions {
  int size = 1;
  int64_t fusion_threshold = int64_t{64} << 20;  // 0: no fusion
  absl::Duration stall_check_time = absl::Seconds(60);     // 0: off
  absl::Duration stall_shutdown_time = absl::ZeroDuration();  // 0: off
};

// Not thread-safe: the background thread of rank 0 owns it. `sets`, `cache`
// and `timeline` are not owned and must outlive it; the cache is read only
// (the runtime updates it while executing responses, on every rank alike).
// Whether a rank's list announces anything to negotiate: a request in full
// or a cache bit.
inline bool Announces(const RequestList& list) {
  return list.requests_size() > 0 || !list.cache_bits().empty();
}

// The bytes of one rank's tensors that `response` names (sizes x element).
int64_t ResponseBytes(const Response& response);

// Appends `ready` to `out` in order, each allreduce fused with the later
// ones it can be fused with while the bytes stay within `fusion_threshold`
// (0: none fused). Consumes `ready` (its responses are moved, not copied).
void FuseResponses(std::vector<Response> ready, int64_t fusion_threshold,
                   ResponseList& out);

// What the coordinator answers a cycle in which every rank announced the
// cache slots set in `bits` and nothing else, with nothing pending from
// earlier cycles: each slot's cached allreduce, slots ascending, fused
// under `fusion_threshold`. Every rank computes it alike from its own copy
// of the cache (a cached step agreed without rank 0). Empty when a slot is
// not in the cache or not of the global process set.
ResponseList CachedStepResponses(const std::string& bits,
                                 const ResponseCache& cache,
                                 const ProcessSetTable& sets,
                                 int64_t fusion_threshold);

// CachedStepResponses, kept for the steps that follow: a training loop
// repeats its steps, and the same bits over the same slots (the cache's
// generation) and threshold give the same list, so it is built again only
// when one of them changed. A loop's step is often several cycles of their
// own bits (the gradients, then a metric's allreduce), so the answers to the
// last kCapacity different bits are kept, the least recently used giving
// way. Not thread-safe (the cycles only).
class CachedStepMemo {
 public:
  static constexpr int kCapacity = 8;

  // CachedStepResponses(bits, cache, sets, fusion_threshold); valid until
  // the next call.
  const ResponseList& For(const std::string& bits, const ResponseCache& cache,
                          const ProcessSetTable& sets,
                          int64_t fusion_threshold);

  // How many answers were built rather than found kept.
  int64_t built() const { return built_; }

 private:
  struct Kept {
    std::string bits;
    ResponseList responses;
    uint64_t last_use = 0;
  };
  // What every kept answer was built under; a change drops them all.
  uint64_t generation_ = 0;
  int64_t fusion_threshold_ = 0;
  uint64_t uses_ = 0;
  int64_t built_ = 0;
  std::vector<Kept> kept_;  // at most kCapacity
};

class Coordinator {
 public:
  Coordinator(CoordinatorOptions options, const ProcessSetTable* sets,
              const ResponseCache* cache, Timeline* timeline);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // `lists[r]` is rank r's list for this cycle.
  ResponseList Compute(const std::vector<RequestList>& lists, absl::Time now);

  // Whether some tensor waits for `rank` alone among the ranks that have
  // announced anything: another member submitted it (in full or by cache
  // bit) and `rank`, a member that has not joined, has not. Rank 0 uses it to
  // hold a cycle's answer briefly for its own submission instead of sending
  // every peer back to sleep.
  bool WaitingFor(int rank) const;

  // Whether `out`, computed from `lists`, leaves the whole job idle: no
  // request, bit or response this cycle, nothing pending or joined, and no
  // set that leaves a rank out (a non-member would otherwise oversleep the
  // members' next operation, since nothing of its own wakes it).
  bool Idle(const std::vector<RequestList>& lists,
            const ResponseList& out) const;

  // Whether nothing waits from earlier cycles (tensors, partial bits,
  // joined ranks): only then may a cycle be agreed without Compute.
  bool Settled() const {
    return table_.empty() && partial_bits_.empty() && bit_first_seen_.empty() &&
           joined_.empty();
  }
  // Counts a cycle agreed without Compute that gave `out`.
  void CountCachedStep(const ResponseList& out);

  // The autotuner's new threshold, for the cycles after this one.
  void set_fusion_threshold(int64_t bytes) {
    options_.fusion_threshold = bytes;
  }

  // Counters since construction, for the log and the tests.
  struct Stats {
    int64_t cycles = 0;
    int64_t full_requests = 0;   // requests negotiated in full
    int64_t cached_ready = 0;    // tensors agreed on by cache bits alone
    int64_t responses = 0;
    int64_t fused_tensors = 0;   // tensors in responses carrying several
    int64_t agreed_steps = 0;    // cycles agreed without Compute
  };
  const Stats& stats() const { return stats_; }
  // The first tensor past the stall check time at the last Compute ("tensor
  // 'w' (allreduce, process set 0) has been submitted by ranks 0, 1 but not
  // by ranks 2 for 61 s"); empty when none is.
  const std::string& stalled() const { return stalled_; }

 private:
  using Key = std::pair<int, std::string>;  // (process set, name)
  struct Pending {
    std::map<int, Request> by_rank;
    std::set<int> from_bits;  // ranks whose request came as a cache bit
    std::string error;        // set when a rank submitted the name twice
    absl::Time first_seen;
    absl::Time last_warned;
    int64_t order = 0;
  };

  void AddRequest(const Request& request, bool from_bit, absl::Time now);
  void ApplyCacheBits(const std::vector<RequestList>& lists, absl::Time now,
                      std::vector<Response>& ready);
  // The cache slots a cycle must visit, ascending: those some rank set a bit
  // for, and those still waiting from an earlier cycle.
  std::vector<int> SlotsToVisit(const std::vector<RequestList>& lists) const;
  std::vector<int> MissingRanks(const Pending& pending,
                                const std::vector<int>& members) const;
  std::vector<int> JoinedMembers(const std::vector<int>& members) const;
  bool FailsForJoinedRanks(const Pending& pending,
                           const std::vector<int>& members) const;
  void CollectReady(std::vector<Response>& ready);
  std::string CheckStalls(absl::Time now);
  void Fuse(std::vector<Response> ready, ResponseList& out);
  // Counts out's responses from index `from` on (responses, fused).
  void CountResponses(const ResponseList& out, int from);
  Response MakeResponse(const Key& key, const Pending& pending);
  void AddJoinResponse(ResponseList& out);

  CoordinatorOptions options_;
  const ProcessSetTable* sets_;
  const ResponseCache* cache_;
  Timeline* timeline_;
  std::map<Key, Pending> table_;
  std::map<int, absl::Time> bit_first_seen_;  // slot -> first partial bit
  std::map<int, std::vector<int>> partial_bits_;  // slot -> ranks with bit
  int64_t next_order_ = 0;
  std::set<int> joined_;
  int last_joined_ = -1;
  int next_set_id_ = 1;
  Stats stats_;
  std::string stalled_;
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_COORDINATOR_H_
