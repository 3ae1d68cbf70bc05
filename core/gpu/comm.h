// Collectives among the members of a process set on device memory, queued on
// the device's hvd stream: NCCL (nccl_comm.h) or staged through pinned host
// memory and the CPU data plane (staged_comm.h).
//
// Every member issues the same calls in the same order with equal arguments
// (except where noted). Errors name the rank, the set and the cause (the NCCL
// error string, the CUDA error, the transport's error).
#ifndef HVD_CORE_GPU_COMM_H_
#define HVD_CORE_GPU_COMM_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/common/types.h"

namespace hvd::gpu {

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;  // this member's index
  virtual int size() const = 0;
  virtual absl::string_view kind() const = 0;  // "nccl", "staged"

  // Whether Allreduce and ReduceScatter can reduce `dtype` with `op` (NCCL
  // has no 16-bit integers).
  virtual bool CanReduce(DataType dtype, ReduceOp op) const = 0;

  // `op` is Sum, Min, Max or Product (Average is the caller's: a Sum and a
  // factor). `premul` != 1 only with Sum: every input is multiplied by it
  // before the reduction (ncclRedOpCreatePreMulSum). `in` may equal `out`.
  virtual absl::Status Allreduce(const void* in, void* out, size_t count,
                                 DataType dtype, ReduceOp op,
                                 double premul) = 0;
  // Member m contributes bytes[m] bytes (`in`); `out` receives the
  // concatenation in member order. Sizes may differ and be 0.
  virtual absl::Status Allgather(const void* in, void* out,
                                 const std::vector<size_t>& bytes) = 0;
  // In place: member `root` sends `bytes` bytes of `data` to all.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  // send_bytes[j] of `in` (in order) go to member j; recv_bytes[j] from
  // member j land in `out` (in order). Differ per member.
  virtual absl::Status Alltoall(const void* in,
                                const std::vector<size_t>& send_bytes,
                                void* out,
                                const std::vector<size_t>& recv_bytes) = 0;
  // `in` holds sum(counts) elements; member i receives block i (counts[i]
  // elements) reduced into `out`. `op` and `premul` as for Allreduce. `out`
  // may be `in` plus this member's offset when the counts are equal.
  virtual absl::Status ReduceScatter(const void* in, void* out,
                                     const std::vector<size_t>& counts,
                                     DataType dtype, ReduceOp op,
                                     double premul) = 0;

  // OK, or why ops queued on this communicator cannot complete (aborted, a
  // peer lost, an asynchronous NCCL error). Cheap; any thread.
  virtual absl::Status Health() = 0;
  // Any thread: queued and later ops end with `reason` (ncclCommAbort makes
  // the kernels return). Idempotent; the first reason is kept.
  virtual void Abort(const absl::Status& reason) = 0;
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_COMM_H_
