// Enqueueing collectives through the C ABI: argument checks that need no
// other rank, then one TensorEntry per tensor into the runtime.
#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/api_state.h"
#include "core/c_api.h"
#include "core/dlpack_tensor.h"
#include "core/runtime/process_sets.h"
#include "core/runtime/validation.h"

namespace hvd::api {
namespace {

using runtime::OpType;
using runtime::TensorEntry;
using Entries = std::vector<std::unique_ptr<TensorEntry>>;

hvd_handle Fail(const absl::Status& status) {
  return Handles().CreateFailed(status);
}

// A refusal at submission (a name still in flight) returns 0 with the error
// as hvd_last_error, so the call itself fails; anything else is a handle.
hvd_handle Submitted(const absl::StatusOr<int64_t>& handle) {
  if (!handle.ok()) {
    SetLastError(handle.status());
    return 0;
  }
  return *handle;
}

absl::Status NotInitialized() {
  return absl::FailedPreconditionError(
      "hvd is not initialized: call hvd.init() first");
}

// The op's name: the caller's, or one generated into `generated`.
absl::string_view NameOf(const hvd_options& o, const char* op,
                         std::string& generated) {
  if (o.name != nullptr && o.name[0] != '\0') return o.name;
  generated = GeneratedName(op, o.process_set_id);
  return generated;
}

// Members of the op's process set, or an error naming the set.
absl::StatusOr<runtime::ProcessSetTable::Members> Members(runtime::Runtime& rt,
                                                          int set) {
  auto ranks = rt.process_sets().Ranks(set);
  if (!ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("process set ", set, " does not exist"));
  }
  if (runtime::PositionIn(*ranks, rt.config().rank) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rt.config().rank, " is not a member of process set ", set,
        " (ranks [", absl::StrJoin(*ranks, ", "), "])"));
  }
  return ranks;
}

absl::Status CheckDevice(runtime::Runtime& rt, const TensorView& view) {
  if (view.device == DeviceType::kCpu || rt.device_ops() != nullptr) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat(
      "tensor is on CUDA device ", view.device_id,
      ": this hvd build has no GPU backend (built without CUDA and NCCL); "
      "move the tensor to the CPU or use a build made where CUDA is "
      "installed"));
}

// GPU tensors: the producer stream's work so far, which the op waits for.
// `cache` keeps one event per device for the tensors of one call.
absl::Status MarkReady(runtime::Runtime& rt, TensorEntry& entry, void* stream,
                       std::map<int, std::shared_ptr<runtime::ReadyEvent>>& cache) {
  if (entry.device != DeviceType::kGpu) return absl::OkStatus();
  auto& ready = cache[entry.device_id];
  if (!ready) {
    auto marked = rt.device_ops()->MarkReady(entry.device_id, stream);
    if (!marked.ok()) return marked.status();
    ready = std::move(*marked);
  }
  entry.ready = ready;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TensorEntry>> MakeEntry(
    runtime::Runtime& rt, OpType type, absl::string_view name,
    DLTensor* input, DLTensor* output, const hvd_options& o) {
  auto in = ViewOf(input, o.dtype);
  if (!in.ok()) return in.status();
  if (absl::Status s = CheckDevice(rt, *in); !s.ok()) return s;
  auto entry = std::make_unique<TensorEntry>();
  runtime::Request& r = entry->request;
  r.set_type(type);
  r.set_name(name.data(), name.size());
  r.set_dtype(static_cast<int32_t>(in->dtype));
  for (int64_t d : in->shape) r.add_shape(d);
  r.set_device(static_cast<int32_t>(in->device));
  r.set_op(o.op);
  r.set_prescale(o.prescale_factor);
  r.set_postscale(o.postscale_factor);
  r.set_root(o.root_rank);
  r.set_process_set(o.process_set_id);
  entry->input = in->data;
  entry->output = in->data;
  entry->device = in->device;
  entry->device_id = in->device_id;
  entry->stream = o.stream;
  if (output != nullptr && output != input) {
    auto out = ViewOf(output, o.dtype);
    if (!out.ok()) return out.status();
    if (out->dtype != in->dtype || out->shape != in->shape) {
      return absl::InvalidArgumentError(
          "output tensor must have the input's dtype and shape");
    }
    if (out->device != in->device || out->device_id != in->device_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output tensor must be on the input's device (input on ",
          DeviceTypeName(in->device), " ", in->device_id, ", output on ",
          DeviceTypeName(out->device), " ", out->device_id, ")"));
    }
    entry->output = out->data;
  }
  if (type == runtime::ALLREDUCE || type == runtime::REDUCESCATTER) {
    if (absl::Status s = CheckReducible(in->dtype, static_cast<ReduceOp>(o.op));
        !s.ok()) {
      return s;
    }
    if (type == runtime::REDUCESCATTER && o.op != HVD_OP_SUM &&
        o.op != HVD_OP_AVERAGE) {
      return absl::InvalidArgumentError(
          "reducescatter supports op Sum and Average only");
    }
  }
  if ((type == runtime::ALLGATHER || type == runtime::ALLTOALL ||
       type == runtime::REDUCESCATTER) &&
      in->shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        runtime::OpTypeName(type), " needs a tensor of at least 1 dimension"));
  }
  return entry;
}

absl::Status CheckRootAndSplits(TensorEntry& entry, const hvd_options& o,
                                int set_size) {
  runtime::Request& r = entry.request;
  if (r.type() == runtime::BROADCAST && (o.root_rank < 0 || o.root_rank >= set_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "root rank ", o.root_rank, " is out of range for a process set of ",
        set_size, " ranks"));
  }
  if (r.type() != runtime::ALLTOALL) return absl::OkStatus();
  const int64_t rows = r.shape(0);
  if (o.splits == nullptr || o.num_splits == 0) {
    if (rows % set_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "first dimension ", rows, " does not divide evenly among ", set_size,
          " ranks: pass splits"));
    }
    for (int i = 0; i < set_size; ++i) r.add_splits(rows / set_size);
    return absl::OkStatus();
  }
  if (o.num_splits != set_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "splits has ", o.num_splits, " entries; the process set has ",
        set_size, " ranks"));
  }
  int64_t sum = 0;
  for (int i = 0; i < o.num_splits; ++i) {
    if (o.splits[i] < 0) {
      return absl::InvalidArgumentError("splits must not be negative");
    }
    sum += o.splits[i];
    r.add_splits(o.splits[i]);
  }
  if (sum != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "splits add up to ", sum, " but the first dimension is ", rows));
  }
  return absl::OkStatus();
}

// The common path of every tensor op.
hvd_handle Enqueue(OpType type, const char* op_name, int32_t count,
                   DLTensor** inputs, DLTensor** outputs,
                   const hvd_options* options) {
  auto read = ReadOptions(options);
  if (!read.ok()) return Fail(read.status());
  const hvd_options& o = *read;
  auto rt = Current();
  if (!rt) return Fail(NotInitialized());
  if (count < 1) return Fail(absl::InvalidArgumentError("no tensors given"));
  auto members = Members(*rt, o.process_set_id);
  if (!members.ok()) return Fail(members.status());
  std::string generated, grouped;
  const absl::string_view base = NameOf(o, op_name, generated);
  Entries entries;
  entries.reserve(count);
  std::map<int, std::shared_ptr<runtime::ReadyEvent>> ready;
  for (int32_t i = 0; i < count; ++i) {
    absl::string_view name = base;
    if (count > 1) name = grouped = absl::StrCat(base, ".", i);
    auto entry = MakeEntry(*rt, type, name, inputs[i],
                           outputs ? outputs[i] : nullptr, o);
    absl::Status s = entry.ok() ? CheckRootAndSplits(
                                      **entry, o,
                                      static_cast<int>((*members)->size()))
                                : entry.status();
    if (s.ok()) s = MarkReady(*rt, **entry, o.stream, ready);
    if (!s.ok()) {
      return Fail(absl::Status(s.code(), absl::StrCat(op_name, " of tensor '",
                                                      name, "': ", s.message())));
    }
    if (count > 1) {
      (*entry)->request.set_group(base.data(), base.size());
      (*entry)->request.set_group_size(count);
    }
    entries.push_back(std::move(*entry));
  }
  return Submitted(rt->Submit(std::move(entries)));
}

hvd_handle EnqueueControl(OpType type, const std::string& name,
                          const hvd_options& o,
                          const std::vector<int32_t>& set_ranks = {}) {
  auto rt = Current();
  if (!rt) return Fail(NotInitialized());
  if (type == runtime::BARRIER) {
    if (auto members = Members(*rt, o.process_set_id); !members.ok()) {
      return Fail(members.status());
    }
  }
  auto entry = std::make_unique<TensorEntry>();
  entry->request.set_type(type);
  entry->request.set_name(name);
  entry->request.set_process_set(type == runtime::BARRIER ? o.process_set_id : 0);
  entry->request.set_root(o.root_rank);
  for (int32_t r : set_ranks) entry->request.add_set_ranks(r);
  Entries entries;
  entries.push_back(std::move(entry));
  return Submitted(rt->Submit(std::move(entries)));
}

// Waits for a control op and returns its result value, or -1 with the error
// as hvd_last_error.
int64_t WaitControl(hvd_handle handle) {
  const int status = hvd_wait(handle, -1);
  int64_t value = -1;
  if (status == HVD_OK) {
    value = hvd_handle_result(handle);
  } else {
    SetLastError(Handles().GetStatus(handle));
  }
  hvd_release(handle);
  return value;
}

}  // namespace
}  // namespace hvd::api

using hvd::api::Enqueue;
using hvd::api::EnqueueControl;

extern "C" {

hvd_handle hvd_allreduce_async(DLTensor* input, DLTensor* output,
                               const hvd_options* options) {
  return Enqueue(hvd::runtime::ALLREDUCE, "allreduce", 1, &input,
                 output ? &output : nullptr, options);
}

hvd_handle hvd_grouped_allreduce_async(int32_t count, DLTensor** inputs,
                                       DLTensor** outputs,
                                       const hvd_options* options) {
  return Enqueue(hvd::runtime::ALLREDUCE, "grouped_allreduce", count, inputs,
                 outputs, options);
}

hvd_handle hvd_allgather_async(DLTensor* input, const hvd_options* options) {
  return Enqueue(hvd::runtime::ALLGATHER, "allgather", 1, &input, nullptr,
                 options);
}

hvd_handle hvd_grouped_allgather_async(int32_t count, DLTensor** inputs,
                                       const hvd_options* options) {
  return Enqueue(hvd::runtime::ALLGATHER, "grouped_allgather", count, inputs,
                 nullptr, options);
}

hvd_handle hvd_broadcast_async(DLTensor* input, DLTensor* output,
                               const hvd_options* options) {
  return Enqueue(hvd::runtime::BROADCAST, "broadcast", 1, &input,
                 output ? &output : nullptr, options);
}

hvd_handle hvd_alltoall_async(DLTensor* input, const hvd_options* options) {
  return Enqueue(hvd::runtime::ALLTOALL, "alltoall", 1, &input, nullptr,
                 options);
}

hvd_handle hvd_reducescatter_async(DLTensor* input,
                                   const hvd_options* options) {
  return Enqueue(hvd::runtime::REDUCESCATTER, "reducescatter", 1, &input,
                 nullptr, options);
}

hvd_handle hvd_grouped_reducescatter_async(int32_t count, DLTensor** inputs,
                                           const hvd_options* options) {
  return Enqueue(hvd::runtime::REDUCESCATTER, "grouped_reducescatter", count,
                 inputs, nullptr, options);
}

hvd_handle hvd_barrier_async(const hvd_options* options) {
  auto o = hvd::api::ReadOptions(options);
  if (!o.ok()) return hvd::api::Fail(o.status());
  return EnqueueControl(hvd::runtime::BARRIER,
                        hvd::api::GeneratedName("barrier", o->process_set_id),
                        *o);
}

hvd_handle hvd_join_async(const hvd_options* options) {
  auto o = hvd::api::ReadOptions(options);
  if (!o.ok()) return hvd::api::Fail(o.status());
  return EnqueueControl(hvd::runtime::JOIN, "join", *o);
}

int32_t hvd_add_process_set(const int32_t* ranks, int32_t count) {
  auto rt = hvd::api::Current();
  if (!rt) return hvd::api::SetLastError(hvd::api::NotInitialized());
  std::vector<int32_t> sorted(ranks, ranks + std::max(count, 0));
  std::sort(sorted.begin(), sorted.end());
  const bool unique =
      std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  if (sorted.empty() || !unique || sorted.front() < 0 ||
      sorted.back() >= rt->config().size) {
    return hvd::api::SetLastError(absl::InvalidArgumentError(absl::StrCat(
        "process set ranks [", absl::StrJoin(sorted, ", "),
        "] must be distinct ranks in [0, ", rt->config().size, ")")));
  }
  hvd_options o = hvd_default_options();
  return static_cast<int32_t>(hvd::api::WaitControl(EnqueueControl(
      hvd::runtime::ADD_PROCESS_SET,
      hvd::api::GeneratedName("add_process_set", 0), o, sorted)));
}

int hvd_remove_process_set(int32_t id) {
  hvd_options o = hvd_default_options();
  o.root_rank = id;
  const hvd_handle handle = EnqueueControl(
      hvd::runtime::REMOVE_PROCESS_SET,
      hvd::api::GeneratedName("remove_process_set", 0), o);
  const int status = hvd_wait(handle, -1);
  if (status != HVD_OK) {
    hvd::api::SetLastError(hvd::api::Handles().GetStatus(handle));
  } else {
    hvd::api::ForgetGeneratedNames(id);
  }
  hvd_release(handle);
  return status == HVD_OK ? HVD_OK : HVD_ERROR;
}

}  // extern "C"
