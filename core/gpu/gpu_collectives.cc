#include "core/gpu/gpu_collectives.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/gpu/plan.h"

namespace hvd::gpu {
namespace {

using runtime::OpResult;
using runtime::Response;
using runtime::TensorEntry;

std::vector<int64_t> OutputShape(const TensorEntry& entry, int64_t rows) {
  std::vector<int64_t> shape(entry.request.shape().begin(),
                             entry.request.shape().end());
  if (shape.empty()) shape.push_back(1);
  shape[0] = rows;
  return shape;
}

// The communicator that can reduce `dtype` with `op`: the set's main one, or
// its staged fallback.
absl::StatusOr<std::shared_ptr<Comm>> ReducingComm(CommSet& comms,
                                                   DataType dtype,
                                                   ReduceOp op) {
  if (comms.main->CanReduce(dtype, op)) return comms.main;
  if (!comms.fallback) {
    return absl::UnimplementedError(
        absl::StrCat(comms.main->kind(), " cannot reduce ", DataTypeName(dtype),
                     " with ", ReduceOpName(op), " and there is no fallback"));
  }
  return comms.fallback();
}

// Reduce-scatter within the host (NCCL), allreduce across hosts (staged:
// the CPU data plane), allgather within the host: `buffer` holds `count`
// elements, a multiple of the host's member count.
absl::Status HierarchicalAllreduce(CommSet& comms, char* buffer, size_t count,
                                   DataType dtype, const ReducePlan& plan) {
  Comm& local = *comms.local;
  const size_t n = static_cast<size_t>(local.size());
  const size_t chunk = count / n;
  const size_t elem = DataTypeSize(dtype);
  char* mine = buffer + local.rank() * chunk * elem;
  if (absl::Status s =
          local.ReduceScatter(buffer, mine, std::vector<size_t>(n, chunk),
                              dtype, plan.op, plan.premul);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          comms.cross->Allreduce(mine, mine, chunk, dtype, plan.op, 1.0);
      !s.ok()) {
    return s;
  }
  return local.Allgather(mine, buffer, std::vector<size_t>(n, chunk * elem));
}

absl::StatusOr<GpuOpResult> Allreduce(const GpuOp& op) {
  const Response& response = op.response;
  const DataType dtype = static_cast<DataType>(response.dtype());
  const size_t elem = DataTypeSize(dtype);
  const ReducePlan plan =
      PlanReduce(dtype, static_cast<ReduceOp>(response.op()),
                 response.prescale(), response.postscale(), op.group.size());
  auto comm = ReducingComm(op.comms, dtype, plan.op);
  if (!comm.ok()) return comm.status();
  GpuOpResult out;
  out.used.push_back(*comm);
  const bool hierarchical = op.comms.local && op.comms.cross &&
                            *comm == op.comms.main &&
                            op.comms.local->CanReduce(dtype, plan.op);
  const std::vector<int64_t> counts(response.sizes().begin(),
                                    response.sizes().end());
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  const bool fused = op.entries.size() != 1 || !op.entries[0] || hierarchical;
  Device& device = op.device;
  char* buffer = nullptr;
  const void* input = nullptr;
  if (fused) {
    const size_t padded =
        hierarchical ? RoundUp(total, op.comms.local->size()) : total;
    auto scratch = device.Scratch(kFusionSlot, padded * elem);
    if (!scratch.ok()) return scratch.status();
    buffer = static_cast<char*>(*scratch);
    const std::vector<size_t> offsets = FusionOffsets(counts, elem);
    std::vector<CopyOp> in;
    for (size_t i = 0; i < op.entries.size(); ++i) {
      const size_t bytes = counts[i] * elem;
      if (op.entries[i]) {
        in.push_back({buffer + offsets[i], op.entries[i]->input, bytes});
      } else if (absl::Status s = device.Zero(buffer + offsets[i], bytes);
                 !s.ok()) {  // A joined rank contributes zeros.
        return s;
      }
    }
    if (absl::Status s = device.CopyBatch(in); !s.ok()) return s;
    input = buffer;
  } else {
    TensorEntry& entry = *op.entries[0];
    buffer = static_cast<char*>(entry.output);
    input = entry.input;
    if (plan.pre != 1.0 && entry.output != entry.input) {
      // The input stays untouched: scale a copy in the output.
      if (absl::Status s = device.Copy(buffer, input, total * elem); !s.ok()) {
        return s;
      }
      input = buffer;
    }
  }
  if (plan.pre != 1.0) {
    if (absl::Status s = device.Scale(buffer, total, dtype, plan.pre);
        !s.ok()) {
      return s;
    }
    input = buffer;
  }
  if (hierarchical) {
    if (absl::Status s = HierarchicalAllreduce(
            op.comms, buffer, RoundUp(total, op.comms.local->size()), dtype,
            plan);
        !s.ok()) {
      return s;
    }
    out.used = {op.comms.local, op.comms.cross};
  } else if (absl::Status s = (*comm)->Allreduce(input, buffer, total, dtype,
                                                 plan.op, plan.premul);
             !s.ok()) {
    return s;
  }
  if (plan.post != 1.0) {
    if (absl::Status s = device.Scale(buffer, total, dtype, plan.post);
        !s.ok()) {
      return s;
    }
  }
  out.results.resize(op.entries.size());
  if (!fused) return out;
  const std::vector<size_t> offsets = FusionOffsets(counts, elem);
  std::vector<CopyOp> copies;
  for (size_t i = 0; i < op.entries.size(); ++i) {
    if (!op.entries[i]) continue;
    copies.push_back(
        {op.entries[i]->output, buffer + offsets[i], counts[i] * elem});
  }
  if (absl::Status s = device.CopyBatch(copies); !s.ok()) return s;
  return out;
}

// The ops below have one tensor per response, as on the CPU path.

absl::StatusOr<OpResult> Allgather(const GpuOp& op, TensorEntry& entry) {
  const Response& response = op.response;
  const size_t row_bytes = response.row_elems(0) * DataTypeSize(entry.dtype());
  std::vector<size_t> bytes(op.group.size());
  int64_t rows = 0;
  for (int m = 0; m < op.group.size(); ++m) {
    bytes[m] = response.sizes(m) * row_bytes;
    rows += response.sizes(m);
  }
  OpResult result;
  result.dtype = entry.dtype();
  result.shape = OutputShape(entry, rows);
  auto output = op.device.Allocate(rows * row_bytes);
  if (!output.ok()) return output.status();
  result.output = *output;
  absl::Status s =
      op.comms.main->Allgather(entry.input, result.output->data(), bytes);
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<OpResult> Broadcast(const GpuOp& op, TensorEntry& entry) {
  if (entry.output != entry.input) {
    if (absl::Status s =
            op.device.Copy(entry.output, entry.input, entry.Bytes());
        !s.ok()) {
      return s;
    }
  }
  absl::Status s =
      op.comms.main->Broadcast(entry.output, entry.Bytes(), op.response.root());
  if (!s.ok()) return s;
  return OpResult();
}

absl::StatusOr<OpResult> Alltoall(const GpuOp& op, TensorEntry& entry) {
  const Response& response = op.response;
  const int n = op.group.size();
  const int me = op.group.index;
  const size_t row_bytes = response.row_elems(0) * DataTypeSize(entry.dtype());
  std::vector<size_t> send(n), recv(n);
  OpResult result;
  int64_t rows = 0;
  for (int j = 0; j < n; ++j) {
    send[j] = response.sizes(me * n + j) * row_bytes;
    const int64_t in_rows = response.sizes(j * n + me);
    recv[j] = in_rows * row_bytes;
    result.received_splits.push_back(in_rows);
    rows += in_rows;
  }
  result.dtype = entry.dtype();
  result.shape = OutputShape(entry, rows);
  auto output = op.device.Allocate(rows * row_bytes);
  if (!output.ok()) return output.status();
  result.output = *output;
  absl::Status s =
      op.comms.main->Alltoall(entry.input, send, result.output->data(), recv);
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<OpResult> ReduceScatter(
    const GpuOp& op, TensorEntry& entry,
    std::vector<std::shared_ptr<Comm>>& used) {
  const Response& response = op.response;
  const int n = op.group.size();
  const DataType dtype = entry.dtype();
  const size_t elem = DataTypeSize(dtype);
  const int64_t rows = response.sizes(0);
  const int64_t row_elems = response.row_elems(0);
  std::vector<size_t> counts(n);
  for (int m = 0; m < n; ++m) counts[m] = SplitRows(rows, n, m) * row_elems;
  const ReducePlan plan =
      PlanReduce(dtype, static_cast<ReduceOp>(response.op()),
                 response.prescale(), response.postscale(), n);
  auto comm = ReducingComm(op.comms, dtype, plan.op);
  if (!comm.ok()) return comm.status();
  used.push_back(*comm);
  const void* input = entry.input;
  if (plan.pre != 1.0) {
    auto scratch = op.device.Scratch(kPrescaleSlot, entry.Bytes());
    if (!scratch.ok()) return scratch.status();
    if (absl::Status s = op.device.Copy(*scratch, input, entry.Bytes());
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            op.device.Scale(*scratch, entry.NumElements(), dtype, plan.pre);
        !s.ok()) {
      return s;
    }
    input = *scratch;
  }
  const size_t mine = counts[op.group.index];
  OpResult result;
  result.dtype = dtype;
  result.shape = OutputShape(entry, SplitRows(rows, n, op.group.index));
  auto output = op.device.Allocate(mine * elem);
  if (!output.ok()) return output.status();
  result.output = *output;
  if (absl::Status s = (*comm)->ReduceScatter(
          input, result.output->data(), counts, dtype, plan.op, plan.premul);
      !s.ok()) {
    return s;
  }
  if (plan.post != 1.0) {
    if (absl::Status s =
            op.device.Scale(result.output->data(), mine, dtype, plan.post);
        !s.ok()) {
      return s;
    }
  }
  return result;
}

}  // namespace

absl::StatusOr<GpuOpResult> RunGpuOp(const GpuOp& op) {
  if (op.response.type() == runtime::ALLREDUCE) return Allreduce(op);
  GpuOpResult out;
  out.results.resize(op.entries.size());
  for (size_t i = 0; i < op.entries.size(); ++i) {
    if (!op.entries[i]) continue;
    TensorEntry& entry = *op.entries[i];
    absl::StatusOr<OpResult> result;
    switch (op.response.type()) {
      case runtime::ALLGATHER:
        result = Allgather(op, entry);
        break;
      case runtime::BROADCAST:
        result = Broadcast(op, entry);
        break;
      case runtime::ALLTOALL:
        result = Alltoall(op, entry);
        break;
      case runtime::REDUCESCATTER:
        result = ReduceScatter(op, entry, out.used);
        break;
      default:
        return absl::InternalError(absl::StrCat(
            "unexpected response type ", op.response.type(), " on the GPU"));
    }
    if (!result.ok()) return result.status();
    out.results[i] = std::move(*result);
  }
  if (op.response.type() != runtime::REDUCESCATTER) {
    out.used.push_back(op.comms.main);
  }
  return out;
}

}  // namespace hvd::gpu
