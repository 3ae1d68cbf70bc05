// A Comm over an NCCL communicator, non-blocking (ncclConfig_t.blocking = 0)
// so that no NCCL call can hold a thread past its deadline: a call that
// answers ncclInProgress is polled until it settles, the deadline passes
// (the communicator is then aborted) or Abort is asked for.
//
// Mapping: allgather of equal sizes is ncclAllGather, of differing sizes one
// ncclBroadcast per member in a group; alltoall is ncclSend/ncclRecv in a
// group; reducescatter of equal counts is ncclReduceScatter, of differing
// counts one ncclReduce per member in a group. Data moves as bytes; reductions
// use the dtype (bool as uint8 with Max for Sum/Max, Min for Min/Product).
// Sum with a premul factor uses ncclRedOpCreatePreMulSum (float32/float64).
//
// Threading: one thread issues the collectives (the backend's device
// thread); Health and Abort may be called from any thread. Abort runs
// ncclCommAbort once no NCCL call of this communicator is in progress (a
// waiting call notices within a millisecond and gives way).
#ifndef HVD_CORE_GPU_NCCL_COMM_H_
#define HVD_CORE_GPU_NCCL_COMM_H_

#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/gpu/comm.h"
#include "core/gpu/cuda_platform.h"

namespace hvd::gpu {

class NcclComm : public Comm {
 public:
  // ncclCommInitRankConfig on `device` with the 128-byte unique id `id`.
  // DeadlineExceeded (the half-made communicator aborted) when not every
  // member joined by `deadline`; `stop`'s status when it returns non-OK
  // meanwhile (polled every millisecond at most; may be empty); Internal
  // with the NCCL error string and ncclGetLastError otherwise. `who`
  // prefixes every error.
  static absl::StatusOr<std::unique_ptr<NcclComm>> Create(
      CudaDevice* device, const std::string& id, int rank, int size,
      absl::Time deadline, const std::function<absl::Status()>& stop,
      std::string who);
  // ncclCommFinalize + ncclCommDestroy (10 s at most, then ncclCommAbort).
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::string_view kind() const override { return "nccl"; }
  bool CanReduce(DataType dtype, ReduceOp op) const override;

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
  struct Reduction {
    ncclDataType_t type = ncclUint8;
    ncclRedOp_t op = ncclSum;
    bool custom = false;  // made by ncclRedOpCreatePreMulSum: destroy it
  };

  NcclComm(CudaDevice* device, ncclComm_t comm, int rank, int size,
           std::string who, absl::Duration timeout);
  absl::Status MakeReduction(DataType dtype, ReduceOp op, double premul,
                             Reduction& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Settles `result` of `call`: polls ncclInProgress (giving way to Abort)
  // until done or the op deadline; then aborts the communicator.
  absl::Status Settle(ncclResult_t result, absl::string_view call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status NcclError(ncclResult_t result, absl::string_view call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ncclCommAbort now (mu_ held) and record `reason`.
  void AbortLocked(const absl::Status& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Aborted();

  CudaDevice* device_;
  const int rank_;
  const int size_;
  const std::string who_;
  const absl::Duration timeout_;  // of one call's ncclInProgress

  absl::Mutex mu_;  // held for every NCCL call on comm_
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> abort_requested_{false};
  absl::Mutex status_mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(status_mu_);
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_NCCL_COMM_H_
