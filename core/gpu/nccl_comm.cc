#include "core/gpu/nccl_comm.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/logging.h"

namespace hvd::gpu {
namespace {

std::optional<ncclDataType_t> NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
    case DataType::kBool:
      return ncclUint8;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    default:  // No 16-bit integers in NCCL.
      return std::nullopt;
  }
}

std::optional<ncclRedOp_t> NcclOp(DataType dtype, ReduceOp op) {
  if (dtype == DataType::kBool) {  // OR and AND on 0/1 bytes
    if (op == ReduceOp::kSum || op == ReduceOp::kMax) return ncclMax;
    if (op == ReduceOp::kMin || op == ReduceOp::kProduct) return ncclMin;
    return std::nullopt;
  }
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
    default:
      return std::nullopt;
  }
}

absl::StatusCode CodeOf(ncclResult_t result) {
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

// How long Settle polls an ncclInProgress without sleeping.
constexpr absl::Duration kSettleSpin = absl::Microseconds(200);

void Nap(absl::Duration& nap) {
  absl::SleepFor(nap);
  nap = std::min(nap * 2, absl::Milliseconds(1));
}

std::vector<size_t> Offsets(const std::vector<size_t>& sizes, size_t unit) {
  std::vector<size_t> offsets;
  size_t at = 0;
  for (size_t s : sizes) {
    offsets.push_back(at);
    at += s * unit;
  }
  return offsets;
}

bool AllEqual(const std::vector<size_t>& values) {
  return std::adjacent_find(values.begin(), values.end(),
                            std::not_equal_to<size_t>()) == values.end();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::Create(
    CudaDevice* device, const std::string& id, int rank, int size,
    absl::Time deadline, const std::function<absl::Status()>& stop,
    std::string who) {
  // A later call's ncclInProgress gets the whole op timeout, not what the
  // init left of it.
  const absl::Duration timeout =
      std::max(deadline - absl::Now(), absl::Seconds(1));
  if (id.size() != NCCL_UNIQUE_ID_BYTES) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": NCCL unique id of ", id.size(),
                     " bytes, expected ", NCCL_UNIQUE_ID_BYTES));
  }
  ScopedDevice scoped(device->id());
  if (!scoped.status().ok()) return scoped.status();
  ncclUniqueId unique;
  std::memcpy(unique.internal, id.data(), NCCL_UNIQUE_ID_BYTES);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t result =
      ncclCommInitRankConfig(&comm, size, unique, rank, &config);
  absl::Duration nap = absl::Microseconds(50);
  while (result == ncclInProgress) {
    if (absl::Now() > deadline) {
      ncclCommAbort(comm);
      return absl::DeadlineExceededError(absl::StrCat(
          who, ": ncclCommInitRank (", size,
          " ranks) did not complete in time: a member is missing or cannot "
          "reach this one"));
    }
    if (stop) {
      // The backend stopped (a peer lost): members may never come.
      if (absl::Status s = stop(); !s.ok()) {
        ncclCommAbort(comm);
        return absl::Status(
            s.code(), absl::StrCat(who, ": ncclCommInitRank (", size,
                                   " ranks) given up: ", s.message()));
      }
    }
    Nap(nap);
    if (ncclCommGetAsyncError(comm, &result) != ncclSuccess) break;
  }
  if (result != ncclSuccess) {
    std::string detail = comm ? ncclGetLastError(comm) : "";
    if (comm) ncclCommAbort(comm);
    return absl::Status(
        CodeOf(result),
        absl::StrCat(who, ": ncclCommInitRank (", size, " ranks, GPU ",
                     device->id(), "): ", ncclGetErrorString(result),
                     detail.empty() ? "" : absl::StrCat(" (", detail, ")"),
                     "; NCCL_DEBUG=WARN says more"));
  }
  return std::unique_ptr<NcclComm>(
      new NcclComm(device, comm, rank, size, std::move(who), timeout));
}

NcclComm::NcclComm(CudaDevice* device, ncclComm_t comm, int rank, int size,
                   std::string who, absl::Duration timeout)
    : device_(device),
      rank_(rank),
      size_(size),
      who_(std::move(who)),
      timeout_(timeout),
      comm_(comm) {}

NcclComm::~NcclComm() {
  absl::MutexLock lock(&mu_);
  if (comm_ == nullptr) return;
  ScopedDevice scoped(device_->id());
  ncclResult_t state = ncclCommFinalize(comm_);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::Duration nap = absl::Microseconds(50);
  while (state == ncclInProgress && absl::Now() < deadline) {
    Nap(nap);
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
  }
  if (state == ncclSuccess) {
    ncclCommDestroy(comm_);
  } else {
    HVD_LOG(WARNING) << who_ << ": ncclCommFinalize "
                     << (state == ncclInProgress
                             ? std::string("still in progress after 10 s")
                             : absl::StrCat("failed: ",
                                            ncclGetErrorString(state)))
                     << "; aborting the communicator instead";
    ncclCommAbort(comm_);
  }
  comm_ = nullptr;
}

bool NcclComm::CanReduce(DataType dtype, ReduceOp op) const {
  return NcclType(dtype).has_value() && NcclOp(dtype, op).has_value();
}

absl::Status NcclComm::Aborted() {
  absl::MutexLock lock(&status_mu_);
  return aborted_;
}

absl::Status NcclComm::NcclError(ncclResult_t result, absl::string_view call) {
  const std::string detail = comm_ ? ncclGetLastError(comm_) : "";
  return absl::Status(
      CodeOf(result),
      absl::StrCat(who_, ": ", call, ": ", ncclGetErrorString(result),
                   detail.empty() ? "" : absl::StrCat(" (", detail, ")")));
}

void NcclComm::AbortLocked(const absl::Status& reason) {
  {
    absl::MutexLock lock(&status_mu_);
    if (aborted_.ok()) aborted_ = reason;
  }
  if (comm_ == nullptr) return;
  ScopedDevice scoped(device_->id());
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclComm::Abort(const absl::Status& reason) {
  {
    absl::MutexLock lock(&status_mu_);
    if (aborted_.ok()) aborted_ = reason;
  }
  abort_requested_ = true;
  // A call in progress polls abort_requested_ and gives way within 1 ms.
  absl::MutexLock lock(&mu_);
  AbortLocked(reason);
}

absl::Status NcclComm::Health() {
  if (absl::Status a = Aborted(); !a.ok()) return a;
  // A call in progress watches the communicator itself: do not wait for it.
  if (!mu_.TryLock()) return absl::OkStatus();
  absl::Status status;
  ncclResult_t state = ncclSuccess;
  if (comm_ != nullptr && ncclCommGetAsyncError(comm_, &state) == ncclSuccess &&
      state != ncclSuccess && state != ncclInProgress) {
    status = NcclError(state, "asynchronous error");
  }
  mu_.Unlock();
  return status;
}

absl::Status NcclComm::Settle(ncclResult_t result, absl::string_view call) {
  if (result == ncclSuccess) return absl::OkStatus();
  if (result != ncclInProgress) return NcclError(result, call);
  // On a non-blocking communicator of two or more ranks NCCL (2.28) answers
  // every collective with ncclInProgress: ncclGroupEnd hands the launch to a
  // thread it starts for the call, which finishes within tens of
  // microseconds. Napping at once would cost every op at least the nap plus
  // the kernel's timer slack (50 us by default), so poll (yielding the CPU
  // to that thread) for a while first.
  const absl::Time now = absl::Now();
  const absl::Time deadline = now + timeout_;
  const absl::Time spin_until = now + kSettleSpin;
  absl::Duration nap = absl::Microseconds(5);
  while (true) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
        r != ncclSuccess) {
      return NcclError(r, "ncclCommGetAsyncError");
    }
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      absl::Status error = NcclError(state, call);
      AbortLocked(error);
      return error;
    }
    if (abort_requested_) {
      AbortLocked(Aborted());
      return Aborted();
    }
    if (absl::Now() > deadline) {
      absl::Status error = absl::DeadlineExceededError(
          absl::StrCat(who_, ": ", call, " still in progress after ",
                       absl::FormatDuration(timeout_)));
      AbortLocked(error);
      return error;
    }
    if (absl::Now() < spin_until) {
      std::this_thread::yield();
    } else {
      Nap(nap);
    }
  }
}

// Every collective: the lock, the device, a live communicator.
#define HVD_NCCL_ENTER()                                                      \
  absl::MutexLock lock(&mu_);                                                 \
  if (comm_ == nullptr) {                                                     \
    absl::Status a = Aborted();                                               \
    return a.ok() ? absl::FailedPreconditionError(who_ +                      \
                                                  ": NCCL communicator gone") \
                  : a;                                                        \
  }                                                                           \
  ScopedDevice scoped(device_->id());                                         \
  if (!scoped.status().ok()) return scoped.status()

absl::Status NcclComm::MakeReduction(DataType dtype, ReduceOp op, double premul,
                                     Reduction& out) {
  const auto type = NcclType(dtype);
  const auto red = NcclOp(dtype, op);
  if (!type || !red) {
    return absl::InvalidArgumentError(
        absl::StrCat(who_, ": NCCL cannot reduce ", DataTypeName(dtype),
                     " with ", ReduceOpName(op)));
  }
  out.type = *type;
  out.op = *red;
  if (premul == 1.0) return absl::OkStatus();
  if (op != ReduceOp::kSum ||
      (dtype != DataType::kFloat32 && dtype != DataType::kFloat64)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who_, ": a premul factor with ", ReduceOpName(op), " on ",
                     DataTypeName(dtype)));
  }
  float f = static_cast<float>(premul);
  double d = premul;
  void* scalar = dtype == DataType::kFloat32 ? static_cast<void*>(&f)
                                             : static_cast<void*>(&d);
  // Host-immediate: NCCL reads the scalar before the call returns.
  absl::Status s =
      Settle(ncclRedOpCreatePreMulSum(&out.op, scalar, out.type,
                                      ncclScalarHostImmediate, comm_),
             "ncclRedOpCreatePreMulSum");
  out.custom = s.ok();
  return s;
}

absl::Status NcclComm::Allreduce(const void* in, void* out, size_t count,
                                 DataType dtype, ReduceOp op, double premul) {
  if (count == 0) return absl::OkStatus();
  HVD_NCCL_ENTER();
  if (size_ == 1 && premul != 1.0 && op == ReduceOp::kSum) {
    // NCCL 2.28's one-rank PreMulSum leaves the last count % 8 elements of
    // a large buffer unscaled (seen on an H200 with 3 Mi + 1 floats).
    return SumOfOne(*device_, in, out, count, dtype, premul);
  }
  Reduction reduction;
  if (absl::Status s = MakeReduction(dtype, op, premul, reduction); !s.ok()) {
    return s;
  }
  absl::Status status =
      Settle(ncclAllReduce(in, out, count, reduction.type, reduction.op, comm_,
                           device_->stream()),
             "ncclAllReduce");
  if (reduction.custom && comm_ != nullptr) {
    ncclRedOpDestroy(reduction.op, comm_);
  }
  return status;
}

absl::Status NcclComm::Allgather(const void* in, void* out,
                                 const std::vector<size_t>& bytes) {
  HVD_NCCL_ENTER();
  char* base = static_cast<char*>(out);
  if (AllEqual(bytes)) {
    if (bytes[0] == 0) return absl::OkStatus();
    return Settle(
        ncclAllGather(in, base, bytes[0], ncclUint8, comm_, device_->stream()),
        "ncclAllGather");
  }
  const std::vector<size_t> offsets = Offsets(bytes, 1);
  ncclGroupStart();
  ncclResult_t result = ncclSuccess;
  for (int m = 0; m < size_ && result == ncclSuccess; ++m) {
    if (bytes[m] == 0) continue;
    const void* send = m == rank_ ? in : base + offsets[m];
    result = ncclBroadcast(send, base + offsets[m], bytes[m], ncclUint8, m,
                           comm_, device_->stream());
  }
  const ncclResult_t end = ncclGroupEnd();
  if (result != ncclSuccess) return Settle(result, "ncclBroadcast");
  return Settle(end, "ncclGroupEnd (allgather of differing sizes)");
}

absl::Status NcclComm::Broadcast(void* data, size_t bytes, int root) {
  if (bytes == 0) return absl::OkStatus();
  HVD_NCCL_ENTER();
  return Settle(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_,
                              device_->stream()),
                "ncclBroadcast");
}

absl::Status NcclComm::Alltoall(const void* in,
                                const std::vector<size_t>& send_bytes,
                                void* out,
                                const std::vector<size_t>& recv_bytes) {
  HVD_NCCL_ENTER();
  const std::vector<size_t> send_at = Offsets(send_bytes, 1);
  const std::vector<size_t> recv_at = Offsets(recv_bytes, 1);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  ncclGroupStart();
  ncclResult_t result = ncclSuccess;
  for (int j = 0; j < size_ && result == ncclSuccess; ++j) {
    if (send_bytes[j] > 0) {
      result = ncclSend(src + send_at[j], send_bytes[j], ncclUint8, j, comm_,
                        device_->stream());
    }
    if (result == ncclSuccess && recv_bytes[j] > 0) {
      result = ncclRecv(dst + recv_at[j], recv_bytes[j], ncclUint8, j, comm_,
                        device_->stream());
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  if (result != ncclSuccess) return Settle(result, "ncclSend/ncclRecv");
  return Settle(end, "ncclGroupEnd (alltoall)");
}

absl::Status NcclComm::ReduceScatter(const void* in, void* out,
                                     const std::vector<size_t>& counts,
                                     DataType dtype, ReduceOp op,
                                     double premul) {
  HVD_NCCL_ENTER();
  if (size_ == 1 && premul != 1.0 && op == ReduceOp::kSum) {
    return SumOfOne(*device_, in, out, counts[0], dtype, premul);  // as above
  }
  Reduction reduction;
  if (absl::Status s = MakeReduction(dtype, op, premul, reduction); !s.ok()) {
    return s;
  }
  absl::Status status;
  if (AllEqual(counts)) {
    if (counts[0] > 0) {
      status = Settle(ncclReduceScatter(in, out, counts[0], reduction.type,
                                        reduction.op, comm_, device_->stream()),
                      "ncclReduceScatter");
    }
  } else {
    const size_t elem = DataTypeSize(dtype);
    const std::vector<size_t> offsets = Offsets(counts, elem);
    const char* src = static_cast<const char*>(in);
    ncclGroupStart();
    ncclResult_t result = ncclSuccess;
    for (int m = 0; m < size_ && result == ncclSuccess; ++m) {
      if (counts[m] == 0) continue;
      result =
          ncclReduce(src + offsets[m], m == rank_ ? out : nullptr, counts[m],
                     reduction.type, reduction.op, m, comm_, device_->stream());
    }
    const ncclResult_t end = ncclGroupEnd();
    status = result != ncclSuccess
                 ? Settle(result, "ncclReduce")
                 : Settle(end,
                          "ncclGroupEnd (reducescatter of differing "
                          "counts)");
  }
  if (reduction.custom && comm_ != nullptr) {
    ncclRedOpDestroy(reduction.op, comm_);
  }
  return status;
}

#undef HVD_NCCL_ENTER

}  // namespace hvd::gpu
