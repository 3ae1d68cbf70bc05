// Collectives on device memory staged through pinned host memory and the CPU
// data plane: the GPU path where NCCL cannot be used (several ranks sharing
// one GPU, 16-bit integer reductions NCCL lacks), and the cross-host step of
// hierarchical allreduce.
//
// Each op queues the copy of its input to pinned memory, waits for that copy
// on the calling thread (the backend's device thread, never the background
// thread), runs the CPU collective over its own transport context, and
// queues the copy back; later work on the stream is ordered after it.
#ifndef HVD_CORE_GPU_STAGED_COMM_H_
#define HVD_CORE_GPU_STAGED_COMM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/collectives/collectives.h"
#include "core/gpu/comm.h"
#include "core/gpu/device.h"
#include "core/transport/transport.h"

namespace hvd::gpu {

class StagedComm : public Comm {
 public:
  // `context` connects exactly the members (context rank = member index);
  // null when `size` is 1. `device` (not owned) outlives this. `who` names
  // this member in errors.
  StagedComm(Device* device, std::unique_ptr<transport::Context> context,
             int rank, int size, collectives::CollectiveOptions options,
             std::string who);
  StagedComm(const StagedComm&) = delete;
  StagedComm& operator=(const StagedComm&) = delete;

  int rank() const override { return group_.index; }
  int size() const override { return group_.size(); }
  absl::string_view kind() const override { return "staged"; }
  bool CanReduce(DataType, ReduceOp) const override { return true; }

  absl::Status Allreduce(const void* in, void* out, size_t count,
                         DataType dtype, ReduceOp op, double premul) override;
  absl::Status Allgather(const void* in, void* out,
                         const std::vector<size_t>& bytes) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Alltoall(const void* in, const std::vector<size_t>& send_bytes,
                        void* out,
                        const std::vector<size_t>& recv_bytes) override;
  absl::Status ReduceScatter(const void* in, void* out,
                             const std::vector<size_t>& counts, DataType dtype,
                             ReduceOp op, double premul) override;

  absl::Status Health() override;
  void Abort(const absl::Status& reason) override;

 private:
  // Pinned memory of `bytes`, once the stream no longer reads the old one.
  absl::StatusOr<char*> Host(size_t bytes);
  // Waits on this thread for the work queued so far (the copies in).
  absl::Status WaitForCopies(absl::string_view op);
  absl::Status Annotate(const absl::Status& status, absl::string_view op);

  Device* device_;
  std::unique_ptr<transport::Context> context_;
  collectives::Group group_;
  collectives::CollectiveOptions options_;
  std::string who_;
  absl::Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_STAGED_COMM_H_
