// Runs the coordinator's responses on this rank: finds the local entries a
// response names, moves their data through the fusion buffer and the CPU
// collectives (or hands GPU tensors to the device backend), completes them,
// and keeps the response cache and the process set table in step with every
// other rank.
#ifndef HVD_CORE_RUNTIME_EXECUTOR_H_
#define HVD_CORE_RUNTIME_EXECUTOR_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "core/collectives/collectives.h"
#include "core/runtime/device_ops.h"
#include "core/runtime/entry.h"
#include "core/runtime/metrics.h"
#include "core/runtime/process_sets.h"
#include "core/runtime/response_cache.h"
#include "core/runtime/tensor_key.h"
#include "core/runtime/timeline.h"
#include "core/transport/transport.h"
#include "proto/negotiation.pb.h"

namespace hvd::runtime {

// Entries submitted on this rank and not yet completed, by (set, name).
// Several entries under one key only when a name was submitted twice (which
// the coordinator turns into an error for all of them), so one is held in
// place: no allocation per tensor per step.
using PendingTable =
    TensorKeyMap<absl::InlinedVector<std::unique_ptr<TensorEntry>, 1>>;

// Key of the local join entry in the PendingTable.
inline constexpr char kJoinName[] = "join";

struct ExecutorOptions {
  // The CPU collectives' options (timeout, algorithm, hosts).
  collectives::CollectiveOptions collectives;
  // Fused tensors this large are allreduced where they are, as pieces of the
  // response's one collective; smaller ones go through the fusion buffer.
  size_t fusion_in_place_bytes = size_t{64} << 10;
  // HVD_FUSION_THRESHOLD: what the fusion buffer's fill is measured against.
  size_t fusion_threshold_bytes = size_t{64} << 20;
};

// Not thread-safe: the background thread owns it. Pointers are not owned.
// `device` may be null (no GPU backend in this build): a response on GPU
// tensors then fails its entries with FailedPrecondition. `metrics`, when
// not null, counts what is done.
class Executor {
 public:
  Executor(int rank, transport::Context* context, ProcessSetTable* sets,
           ResponseCache* cache, Timeline* timeline,
           const ExecutorOptions& options, DeviceOps* device = nullptr,
           Metrics* metrics = nullptr);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Executes `response`, completing the entries it names (taken out of
  // `pending`). A response on GPU tensors goes to the device backend (a
  // copy of it: `response` may be a cached step's, kept). An error response or
  // a bad local argument fails just those entries; a non-OK return means the
  // data plane failed and the job cannot go on: the response's entries not
  // completed are back in `pending`, and the caller fails everything.
  absl::Status Execute(const Response& response, PendingTable& pending);

  // The autotuner's small-message threshold, chunk size, hierarchical
  // switches and fusion threshold, for the responses after this one.
  void Retune(const Tuning& tuning);

 private:
  using Entries = std::vector<std::unique_ptr<TensorEntry>>;
  Entries Take(const Response& response, PendingTable& pending);
  void CompleteJoin(const Response& response, PendingTable& pending);
  void FailResponse(const Response& response, Entries& entries,
                    PendingTable& pending);
  void UpdateCache(const Response& response);
  // An allreduce response's buffers: `pieces` (input, output, element
  // count) in collective order; `small` indexes the entries that go
  // through the fusion buffer (`fusion`, `small_count` elements; its piece
  // comes first).
  struct AllreducePieces {
    std::vector<collectives::AllreducePiece> pieces;
    std::vector<size_t> small;
    int64_t small_count = 0;
    void* fusion = nullptr;
    std::vector<std::unique_ptr<HostBuffer>> zeros;  // for joined ranks
  };
  AllreducePieces PlanPieces(const Response& response, Entries& entries);
  void GatherSmall(const Response& response, const Entries& entries,
                   AllreducePieces& plan);
  void ScatterSmall(const Response& response, Entries& entries,
                    const AllreducePieces& plan);
  absl::Status Allreduce(const Response& response, Entries& entries,
                         const collectives::Group& group);
  absl::Status Allgather(const Response& response, TensorEntry& entry,
                         const collectives::Group& group);
  absl::Status Broadcast(const Response& response, TensorEntry& entry,
                         const collectives::Group& group);
  absl::Status Alltoall(const Response& response, TensorEntry& entry,
                        const collectives::Group& group);
  absl::Status ReduceScatter(const Response& response, TensorEntry& entry,
                             const collectives::Group& group);
  absl::Status RunData(const Response& response, Entries& entries,
                       const collectives::Group& group);
  absl::Status RunOnDevice(const Response& response, Entries& entries,
                           const collectives::Group& group);
  void* FusionBuffer(size_t bytes);
  // This rank's group in process set `set`, nullptr when it is not a member
  // (or no such set). The group of the set used last is kept and made again
  // only when that set's list changes: no copy of the ranks per call.
  const collectives::Group* GroupOf(int set);

  int rank_;
  transport::Context* context_;
  ProcessSetTable* sets_;
  ResponseCache* cache_;
  Timeline* timeline_;
  collectives::CollectiveOptions options_;
  ProcessSetTable::Members group_ranks_;  // what group_ was made from
  collectives::Group group_;
  DeviceOps* device_;
  std::unique_ptr<HostBuffer> fusion_;  // persistent, grown on demand
  size_t fusion_in_place_bytes_;
  size_t fusion_threshold_bytes_;
  Metrics* metrics_;
};

// Completes every entry with `status`.
void FailEntries(std::vector<std::unique_ptr<TensorEntry>>& entries,
                 const absl::Status& status);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_EXECUTOR_H_
