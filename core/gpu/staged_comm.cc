#include "core/gpu/staged_comm.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/collectives/reduce.h"

namespace hvd::gpu {
namespace {

size_t Sum(const std::vector<size_t>& values) {
  return std::accumulate(values.begin(), values.end(), size_t{0});
}

}  // namespace

StagedComm::StagedComm(Device* device,
                       std::unique_ptr<transport::Context> context, int rank,
                       int size, collectives::CollectiveOptions options,
                       std::string who)
    : device_(device),
      context_(std::move(context)),
      options_(options),
      who_(std::move(who)) {
  for (int m = 0; m < size; ++m) group_.ranks.push_back(m);
  group_.index = rank;
}

absl::Status StagedComm::Health() {
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return aborted_;
  }
  return context_ ? context_->status() : absl::OkStatus();
}

void StagedComm::Abort(const absl::Status& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return;
    aborted_ = reason;
  }
  if (context_) context_->Abort(reason);
}

absl::Status StagedComm::Annotate(const absl::Status& status,
                                  absl::string_view op) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(who_, ": staged ", op, ": ",
                                                  status.message()));
}

absl::StatusOr<char*> StagedComm::Host(size_t bytes) {
  auto host = device_->HostScratch(bytes, absl::Now() + options_.timeout);
  if (!host.ok()) return host.status();
  return static_cast<char*>(*host);
}

absl::Status StagedComm::WaitForCopies(absl::string_view op) {
  auto event = device_->Record();
  if (!event.ok()) return event.status();
  return WaitEvent(**event, absl::Now() + options_.timeout,
                   absl::StrCat(who_, ": copy to host for staged ", op),
                   [this] { return Health(); });
}

absl::Status StagedComm::Allreduce(const void* in, void* out, size_t count,
                                   DataType dtype, ReduceOp op, double premul) {
  const size_t bytes = count * DataTypeSize(dtype);
  if (absl::Status s = Health(); !s.ok()) return s;
  if (size() == 1) {  // Nothing to exchange: stay on the device.
    return SumOfOne(*device_, in, out, count, dtype, premul);
  }
  auto host = Host(bytes);
  if (!host.ok()) return host.status();
  if (absl::Status s = device_->Copy(*host, in, bytes); !s.ok()) return s;
  if (absl::Status s = WaitForCopies("allreduce"); !s.ok()) return s;
  if (premul != 1.0) collectives::Scale(*host, count, dtype, premul);
  absl::Status s = collectives::Allreduce(*context_, group_, *host, count,
                                          dtype, op, options_);
  if (!s.ok()) return Annotate(s, "allreduce");
  return device_->Copy(out, *host, bytes);
}

absl::Status StagedComm::Allgather(const void* in, void* out,
                                   const std::vector<size_t>& bytes) {
  if (absl::Status s = Health(); !s.ok()) return s;
  if (size() == 1) return device_->Copy(out, in, bytes[0]);
  size_t offset = 0;
  for (int m = 0; m < rank(); ++m) offset += bytes[m];
  auto host = Host(Sum(bytes));
  if (!host.ok()) return host.status();
  char* mine = *host + offset;
  if (absl::Status s = device_->Copy(mine, in, bytes[rank()]); !s.ok()) {
    return s;
  }
  if (absl::Status s = WaitForCopies("allgather"); !s.ok()) return s;
  absl::Status s =
      collectives::Allgather(*context_, group_, mine, *host, bytes, options_);
  if (!s.ok()) return Annotate(s, "allgather");
  return device_->Copy(out, *host, Sum(bytes));
}

absl::Status StagedComm::Broadcast(void* data, size_t bytes, int root) {
  if (absl::Status s = Health(); !s.ok()) return s;
  if (size() == 1) return absl::OkStatus();
  auto host = Host(bytes);
  if (!host.ok()) return host.status();
  if (rank() == root) {
    if (absl::Status s = device_->Copy(*host, data, bytes); !s.ok()) return s;
  }
  // Also off the root: the stream may still be reading the pinned memory
  // for the op before.
  if (absl::Status s = WaitForCopies("broadcast"); !s.ok()) return s;
  absl::Status s =
      collectives::Broadcast(*context_, group_, *host, bytes, root, options_);
  if (!s.ok()) return Annotate(s, "broadcast");
  return rank() == root ? absl::OkStatus() : device_->Copy(data, *host, bytes);
}

absl::Status StagedComm::Alltoall(const void* in,
                                  const std::vector<size_t>& send_bytes,
                                  void* out,
                                  const std::vector<size_t>& recv_bytes) {
  if (absl::Status s = Health(); !s.ok()) return s;
  const size_t send = Sum(send_bytes);
  const size_t recv = Sum(recv_bytes);
  if (size() == 1) return device_->Copy(out, in, send);
  auto host = Host(send + recv);
  if (!host.ok()) return host.status();
  if (absl::Status s = device_->Copy(*host, in, send); !s.ok()) return s;
  if (absl::Status s = WaitForCopies("alltoall"); !s.ok()) return s;
  absl::Status s = collectives::Alltoall(*context_, group_, *host, send_bytes,
                                         *host + send, recv_bytes, options_);
  if (!s.ok()) return Annotate(s, "alltoall");
  return device_->Copy(out, *host + send, recv);
}

absl::Status StagedComm::ReduceScatter(const void* in, void* out,
                                       const std::vector<size_t>& counts,
                                       DataType dtype, ReduceOp op,
                                       double premul) {
  if (absl::Status s = Health(); !s.ok()) return s;
  const size_t elem = DataTypeSize(dtype);
  const size_t total = Sum(counts);
  const size_t mine = counts[rank()];
  if (size() == 1) return SumOfOne(*device_, in, out, mine, dtype, premul);
  auto host = Host((total + mine) * elem);
  if (!host.ok()) return host.status();
  char* result = *host + total * elem;
  if (absl::Status s = device_->Copy(*host, in, total * elem); !s.ok()) {
    return s;
  }
  if (absl::Status s = WaitForCopies("reducescatter"); !s.ok()) return s;
  if (premul != 1.0) collectives::Scale(*host, total, dtype, premul);
  absl::Status s = collectives::ReduceScatter(*context_, group_, *host, result,
                                              counts, dtype, op, options_);
  if (!s.ok()) return Annotate(s, "reducescatter");
  return device_->Copy(out, result, mine * elem);
}

}  // namespace hvd::gpu
