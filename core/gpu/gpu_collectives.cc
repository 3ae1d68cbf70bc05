#include "core/gpu/gpu_collectives.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/gpu/plan.h"

namespace hvd::gpu {
namespace {

using runtime::OpResult;
using runtime::OutputShape;
using runtime::Response;
using runtime::TensorEntry;

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

// What an allreduce response does, decided before any GPU work is queued.
struct AllreduceSteps {
  DataType dtype = DataType::kFloat32;
  size_t elem = 0;  // bytes per element
  ReducePlan plan;
  std::shared_ptr<Comm> comm;  // reduces, unless hierarchical
  // Reduce-scatter within the host, allreduce across hosts, allgather within.
  bool hierarchical = false;
  // Through the fusion buffer: several tensors, a joined rank, or
  // hierarchical (which pads the buffer).
  bool fused = false;
  std::vector<int64_t> counts;  // elements per entry
  size_t total = 0;             // their sum
};

absl::StatusOr<AllreduceSteps> PlanAllreduce(const GpuOp& op) {
  const Response& response = op.response;
  AllreduceSteps steps;
  steps.dtype = static_cast<DataType>(response.dtype());
  steps.elem = DataTypeSize(steps.dtype);
  steps.plan = PlanReduce(steps.dtype, static_cast<ReduceOp>(response.op()),
                          response.prescale(), response.postscale(),
                          op.group.size());
  auto comm = ReducingComm(op.comms, steps.dtype, steps.plan.op);
  if (!comm.ok()) return comm.status();
  steps.comm = *comm;
  steps.hierarchical = op.comms.local && op.comms.cross &&
                       steps.comm == op.comms.main &&
                       op.comms.local->CanReduce(steps.dtype, steps.plan.op);
  steps.counts.assign(response.sizes().begin(), response.sizes().end());
  steps.total = std::accumulate(steps.counts.begin(), steps.counts.end(),
                                size_t{0});
  steps.fused =
      op.entries.size() != 1 || !op.entries[0] || steps.hierarchical;
  return steps;
}

// Where the reduction reads and where it writes its result.
struct ReduceBuffers {
  char* buffer = nullptr;
  const void* input = nullptr;
};

// Copies the entries' inputs into the fusion buffer (a joined rank
// contributes zeros), padded for the hierarchical split.
absl::StatusOr<ReduceBuffers> FuseInputs(const GpuOp& op,
                                         const AllreduceSteps& steps) {
  const size_t padded = steps.hierarchical
                            ? RoundUp(steps.total, op.comms.local->size())
                            : steps.total;
  auto scratch = op.device.Scratch(kFusionSlot, padded * steps.elem);
  if (!scratch.ok()) return scratch.status();
  char* buffer = static_cast<char*>(*scratch);
  const std::vector<size_t> offsets = FusionOffsets(steps.counts, steps.elem);
  std::vector<CopyOp> in;
  for (size_t i = 0; i < op.entries.size(); ++i) {
    const size_t bytes = steps.counts[i] * steps.elem;
    if (op.entries[i]) {
      in.push_back({buffer + offsets[i], op.entries[i]->input, bytes});
    } else if (absl::Status s = op.device.Zero(buffer + offsets[i], bytes);
               !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = op.device.CopyBatch(in); !s.ok()) return s;
  return ReduceBuffers{buffer, buffer};
}

// One tensor, unfused: reduced into its output. With a prescale the input
// stays untouched: the pass scales a copy in the output.
absl::StatusOr<ReduceBuffers> UnfusedBuffers(const GpuOp& op,
                                             const AllreduceSteps& steps) {
  TensorEntry& entry = *op.entries[0];
  ReduceBuffers b{static_cast<char*>(entry.output), entry.input};
  if (steps.plan.pre != 1.0 && entry.output != entry.input) {
    if (absl::Status s =
            op.device.Copy(b.buffer, b.input, steps.total * steps.elem);
        !s.ok()) {
      return s;
    }
    b.input = b.buffer;
  }
  return b;
}

// The prescale pass, the reduction, the postscale pass.
absl::Status ScaleAndReduce(const GpuOp& op, const AllreduceSteps& steps,
                            ReduceBuffers b) {
  const ReducePlan& plan = steps.plan;
  if (plan.pre != 1.0) {
    if (absl::Status s =
            op.device.Scale(b.buffer, steps.total, steps.dtype, plan.pre);
        !s.ok()) {
      return s;
    }
    b.input = b.buffer;
  }
  absl::Status reduced =
      steps.hierarchical
          ? HierarchicalAllreduce(op.comms, b.buffer,
                                  RoundUp(steps.total, op.comms.local->size()),
                                  steps.dtype, plan)
          : steps.comm->Allreduce(b.input, b.buffer, steps.total, steps.dtype,
                                  plan.op, plan.premul);
  if (!reduced.ok()) return reduced;
  if (plan.post == 1.0) return absl::OkStatus();
  return op.device.Scale(b.buffer, steps.total, steps.dtype, plan.post);
}

// Copies the reduced fusion buffer out to the entries' outputs.
absl::Status UnfuseOutputs(const GpuOp& op, const AllreduceSteps& steps,
                           const char* buffer) {
  const std::vector<size_t> offsets = FusionOffsets(steps.counts, steps.elem);
  std::vector<CopyOp> copies;
  for (size_t i = 0; i < op.entries.size(); ++i) {
    if (!op.entries[i]) continue;
    copies.push_back({op.entries[i]->output, buffer + offsets[i],
                      steps.counts[i] * steps.elem});
  }
  return op.device.CopyBatch(copies);
}

absl::StatusOr<GpuOpResult> Allreduce(const GpuOp& op) {
  auto steps = PlanAllreduce(op);
  if (!steps.ok()) return steps.status();
  auto buffers = steps->fused ? FuseInputs(op, *steps)
                              : UnfusedBuffers(op, *steps);
  if (!buffers.ok()) return buffers.status();
  if (absl::Status s = ScaleAndReduce(op, *steps, *buffers); !s.ok()) {
    return s;
  }
  if (steps->fused) {
    if (absl::Status s = UnfuseOutputs(op, *steps, buffers->buffer); !s.ok()) {
      return s;
    }
  }
  GpuOpResult out;
  out.results.resize(op.entries.size());
  if (steps->hierarchical) {
    out.used = {op.comms.local, op.comms.cross};
  } else {
    out.used.push_back(steps->comm);
  }
  return out;
}

// The ops below have one tensor per response, as on the CPU path.

// Gives `result` the entry's dtype, a shape of `rows` rows and a fresh
// device output of that size.
absl::Status AllocateOutput(const GpuOp& op, const TensorEntry& entry,
                            int64_t rows, size_t row_bytes, OpResult& result) {
  result.dtype = entry.dtype();
  result.shape = OutputShape(entry, rows);
  auto output = op.device.Allocate(rows * row_bytes);
  if (!output.ok()) return output.status();
  result.output = *output;
  return absl::OkStatus();
}

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
  if (absl::Status s = AllocateOutput(op, entry, rows, row_bytes, result);
      !s.ok()) {
    return s;
  }
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
  if (absl::Status s = AllocateOutput(op, entry, rows, row_bytes, result);
      !s.ok()) {
    return s;
  }
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
