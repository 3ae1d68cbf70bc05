#include "core/runtime/executor.h"

#include <cstring>
#include <numeric>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/collectives/reduce.h"
#include "core/runtime/entry.h"
#include "core/runtime/validation.h"

namespace hvd::runtime {
namespace {

// An Average over `members` is a Sum, then a division by `members` where no
// other factor applies (the framework's own sum / N, bit for bit), else a
// multiplication by postscale / members, as Horovod does it.
void AverageAsSum(int members, ReduceOp* op, double* postscale, int* divisor) {
  if (*op != ReduceOp::kAverage) return;
  *op = ReduceOp::kSum;
  if (*postscale == 1.0) {
    *divisor = members;
  } else {
    *postscale /= members;
  }
}

// memcpy, for any byte count: a tensor with no elements may have a null data
// pointer, and memcpy's pointers must not be null even for 0 bytes.
void CopyBytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

void Complete(TensorEntry& entry, const absl::Status& status,
              OpResult result = {}) {
  if (entry.done) entry.done(status, std::move(result));
  entry.done = nullptr;
}

absl::Status WithTensor(const absl::Status& status, const Response& response,
                        absl::string_view name) {
  return absl::Status(status.code(),
                      absl::StrCat(OpTypeName(response.type()), " of tensor '",
                                   name, "' failed: ", status.message()));
}

// Rows of member `index` when `rows` are split over `n` members, the first
// members taking one more when it does not divide evenly.
int64_t SplitRows(int64_t rows, int n, int index) {
  return rows / n + (index < rows % n ? 1 : 0);
}

// Data ops on GPU tensors go to the device backend; control ops never carry
// a device.
bool OnDevice(const Response& response) {
  if (response.device() != static_cast<int32_t>(DeviceType::kGpu)) {
    return false;
  }
  switch (response.type()) {
    case ALLREDUCE:
    case ALLGATHER:
    case BROADCAST:
    case ALLTOALL:
    case REDUCESCATTER:
      return true;
    default:
      return false;
  }
}

}  // namespace

void FailEntries(std::vector<std::unique_ptr<TensorEntry>>& entries,
                 const absl::Status& status) {
  for (auto& entry : entries) {
    if (entry) Complete(*entry, status);
  }
}

Executor::Executor(int rank, transport::Context* context,
                   ProcessSetTable* sets, ResponseCache* cache,
                   Timeline* timeline, const ExecutorOptions& options,
                   DeviceOps* device, Metrics* metrics)
    : rank_(rank),
      context_(context),
      sets_(sets),
      cache_(cache),
      timeline_(timeline),
      options_(options.collectives),
      device_(device),
      fusion_in_place_bytes_(options.fusion_in_place_bytes),
      fusion_threshold_bytes_(options.fusion_threshold_bytes),
      metrics_(metrics) {}

Executor::Entries Executor::Take(const Response& response,
                                 PendingTable& pending) {
  Entries entries;
  for (const std::string& name : response.names()) {
    auto it = pending.find(TensorKeyView(response.process_set(), name));
    if (it == pending.end() || it->second.empty()) {
      entries.push_back(nullptr);  // Joined rank, or not a member.
      continue;
    }
    entries.push_back(std::move(it->second.front()));
    it->second.erase(it->second.begin());
    if (it->second.empty()) pending.erase(it);
  }
  return entries;
}

void Executor::UpdateCache(const Response& response) {
  if (response.type() != ALLREDUCE) return;
  int dim = 0;
  for (int i = 0; i < response.names_size(); ++i) {
    if (!response.error().empty()) {
      cache_->Erase(response.process_set(), response.names(i));
      continue;
    }
    cache_->PutFromResponse(response, i, dim);
    dim += response.ndims(i);
  }
}

void Executor::CompleteJoin(const Response& response,
                            PendingTable& pending) {
  auto it = pending.find(TensorKeyView(0, kJoinName));
  if (it == pending.end()) return;
  for (auto& entry : it->second) {
    OpResult result;
    result.value = response.last_joined();
    Complete(*entry, absl::OkStatus(), std::move(result));
  }
  pending.erase(it);
}

// An error response fails its entries, and also duplicates still queued
// under the same names.
void Executor::FailResponse(const Response& response, Entries& entries,
                            PendingTable& pending) {
  UpdateCache(response);
  const absl::Status error = absl::InvalidArgumentError(response.error());
  FailEntries(entries, error);
  for (const auto& name : response.names()) {
    auto it = pending.find(TensorKeyView(response.process_set(), name));
    if (it == pending.end()) continue;
    for (auto& entry : it->second) Complete(*entry, error);
    pending.erase(it);
  }
}

void Executor::Retune(const Tuning& tuning) {
  options_.small_message_bytes =
      static_cast<size_t>(tuning.small_message_bytes());
  options_.chunk_bytes = static_cast<size_t>(tuning.chunk_bytes());
  options_.hierarchical_allreduce = tuning.hierarchical_allreduce();
  options_.hierarchical_allgather = tuning.hierarchical_allgather();
  fusion_threshold_bytes_ = static_cast<size_t>(tuning.fusion_threshold());
}

const collectives::Group* Executor::GroupOf(int set) {
  ProcessSetTable::Members members = sets_->Ranks(set);
  if (!members) return nullptr;
  if (members != group_ranks_) {
    group_ranks_ = members;
    group_.ranks = *members;
    group_.index = PositionIn(*members, rank_);
  }
  return group_.index < 0 ? nullptr : &group_;
}

absl::Status Executor::Execute(const Response& response,
                               PendingTable& pending) {
  for (const auto& name : response.names()) timeline_->ActivityEnd(name);
  if (response.type() == JOIN) {
    CompleteJoin(response, pending);
    return absl::OkStatus();
  }
  Entries entries = Take(response, pending);
  if (!response.error().empty()) {
    FailResponse(response, entries, pending);
    return absl::OkStatus();
  }
  if (response.type() == ADD_PROCESS_SET) {
    sets_->Add(response.new_set_id(), {response.set_ranks().begin(),
                                       response.set_ranks().end()});
  } else if (response.type() == REMOVE_PROCESS_SET) {
    for (auto& entry : entries) {
      if (!entry) continue;
      sets_->Remove(entry->request.root());
      cache_->EraseProcessSet(entry->request.root());
      if (device_ != nullptr) device_->RemoveProcessSet(entry->request.root());
    }
  }
  UpdateCache(response);
  const collectives::Group* group = GroupOf(response.process_set());
  if (group == nullptr) return absl::OkStatus();  // Not a member.
  if (OnDevice(response)) return RunOnDevice(response, entries, *group);
  absl::Status status = RunData(response, entries, *group);
  if (!status.ok()) {
    // The caller fails them with everything else, with the job's status.
    for (auto& entry : entries) {
      if (!entry || !entry->done) continue;
      const std::string& name = entry->request.name();
      auto& waiting = pending[{response.process_set(), name}];
      waiting.insert(waiting.begin(), std::move(entry));
    }
    return status;
  }
  if (metrics_ != nullptr) {
    uint64_t bytes = 0;
    for (const auto& entry : entries) {
      if (entry) bytes += entry->Bytes();
    }
    metrics_->Collective(response.type(), bytes);
  }
  for (auto& entry : entries) {
    if (!entry || !entry->done) continue;
    OpResult result;
    result.value = response.new_set_id();
    Complete(*entry, absl::OkStatus(), std::move(result));
  }
  return absl::OkStatus();
}

absl::Status Executor::RunData(const Response& response, Entries& entries,
                               const collectives::Group& group) {
  switch (response.type()) {
    case ALLREDUCE:
      return Allreduce(response, entries, group);
    case BARRIER:
    case ADD_PROCESS_SET:
    case REMOVE_PROCESS_SET:
      return absl::OkStatus();
    default:
      break;
  }
  using Fn = absl::Status (Executor::*)(const Response&, TensorEntry&,
                                        const collectives::Group&);
  Fn fn = nullptr;
  switch (response.type()) {
    case ALLGATHER: fn = &Executor::Allgather; break;
    case BROADCAST: fn = &Executor::Broadcast; break;
    case ALLTOALL: fn = &Executor::Alltoall; break;
    case REDUCESCATTER: fn = &Executor::ReduceScatter; break;
    default:
      return absl::InternalError(absl::StrCat("unexpected response type ",
                                              response.type()));
  }
  for (auto& entry : entries) {
    if (!entry) continue;
    timeline_->ActivityStart(entry->request.name(),
                             absl::AsciiStrToUpper(OpTypeName(response.type())));
    absl::Status status = (this->*fn)(response, *entry, group);
    timeline_->ActivityEnd(entry->request.name());
    if (!status.ok()) return WithTensor(status, response, entry->request.name());
  }
  return absl::OkStatus();
}

absl::Status Executor::RunOnDevice(const Response& response, Entries& entries,
                                   const collectives::Group& group) {
  if (device_ == nullptr) {
    FailEntries(entries,
                absl::FailedPreconditionError(absl::StrCat(
                    OpTypeName(response.type()), " of GPU tensor '",
                    response.names(0),
                    "': this hvd build has no GPU backend (built without "
                    "CUDA and NCCL)")));
    return absl::OkStatus();
  }
  const std::string activity =
      absl::AsciiStrToUpper(absl::StrCat("gpu_", OpTypeName(response.type())));
  for (auto& entry : entries) {
    if (!entry) continue;
    // The span ends when the backend completes the entry, on its thread
    // (the timeline is thread-safe and outlives the backend).
    timeline_->ActivityStart(entry->request.name(), activity);
    entry->done = [timeline = timeline_, name = entry->request.name(),
                   done = std::move(entry->done)](const absl::Status& status,
                                                  OpResult result) {
      timeline->ActivityEnd(name);
      if (done) done(status, std::move(result));
    };
  }
  return device_->Execute(response, entries, group);  // a copy
}

void* Executor::FusionBuffer(size_t bytes) {
  if (!fusion_ || fusion_->size() < bytes) {
    fusion_ = std::make_unique<HostBuffer>(bytes);
  }
  return fusion_->data();
}

// One collective for the whole response. Tensors of at least
// fusion_in_place_bytes_ take part where they are, as pieces of it
// (collectives::AllreduceMany), instead of being copied into the fusion
// buffer and back: a copy runs at memory speed, about as fast as the
// allreduce itself on shared memory. Only the small ones are gathered, so
// that the ring does not move them as tiny messages. The split depends on
// the response alone, so every rank passes the same pieces.
Executor::AllreducePieces Executor::PlanPieces(const Response& response,
                                               Entries& entries) {
  const size_t elem = DataTypeSize(static_cast<DataType>(response.dtype()));
  AllreducePieces plan;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t count = response.sizes(i);
    const size_t bytes = count * elem;
    if (entries.size() > 1 && bytes < fusion_in_place_bytes_) {
      plan.small.push_back(i);
      plan.small_count += count;
      continue;
    }
    TensorEntry* entry = entries[i].get();
    if (entry == nullptr) {  // Joined rank contributes zeros.
      plan.zeros.push_back(std::make_unique<HostBuffer>(bytes));
      std::memset(plan.zeros.back()->data(), 0, bytes);
      void* zeros = plan.zeros.back()->data();
      plan.pieces.push_back({zeros, zeros, static_cast<size_t>(count)});
      continue;
    }
    // Out of place, the collective reads the input where it is, unless a
    // prescale must first be applied to a copy.
    const void* input = entry->input;
    if (input != entry->output && response.prescale() != 1.0) {
      CopyBytes(entry->output, input, bytes);
      input = entry->output;
    }
    plan.pieces.push_back({input, entry->output, static_cast<size_t>(count)});
  }
  return plan;
}

// Copies the small tensors into the fusion buffer (zeros for a joined rank)
// and puts it last among the pieces: the large tensors then start where the
// ring's segments do, instead of a fusion buffer's odd length after it, and
// fewer of their ends fall inside a chunk (each such end cuts the chunk in
// two messages).
void Executor::GatherSmall(const Response& response, const Entries& entries,
                           AllreducePieces& plan) {
  if (plan.small.empty()) return;
  const size_t elem = DataTypeSize(static_cast<DataType>(response.dtype()));
  plan.fusion = FusionBuffer(plan.small_count * elem);
  if (metrics_ != nullptr) {
    metrics_->FusionFill(plan.small_count * elem, fusion_threshold_bytes_);
  }
  timeline_->ActivityStart(response.names(0), "MEMCPY_IN_FUSION_BUFFER");
  char* at = static_cast<char*>(plan.fusion);
  for (size_t i : plan.small) {
    const size_t bytes = response.sizes(i) * elem;
    if (entries[i]) {
      CopyBytes(at, entries[i]->input, bytes);
    } else {
      if (bytes > 0) std::memset(at, 0, bytes);
    }
    at += bytes;
  }
  timeline_->ActivityEnd(response.names(0));
  plan.pieces.push_back(
      {plan.fusion, plan.fusion, static_cast<size_t>(plan.small_count)});
}

void Executor::ScatterSmall(const Response& response, Entries& entries,
                            const AllreducePieces& plan) {
  if (plan.small.empty()) return;
  const size_t elem = DataTypeSize(static_cast<DataType>(response.dtype()));
  timeline_->ActivityStart(response.names(0), "MEMCPY_OUT_FUSION_BUFFER");
  const char* from = static_cast<const char*>(plan.fusion);
  for (size_t i : plan.small) {
    const size_t bytes = response.sizes(i) * elem;
    if (entries[i]) CopyBytes(entries[i]->output, from, bytes);
    from += bytes;
  }
  timeline_->ActivityEnd(response.names(0));
}

absl::Status Executor::Allreduce(const Response& response, Entries& entries,
                                 const collectives::Group& group) {
  const DataType dtype = static_cast<DataType>(response.dtype());
  ReduceOp op = static_cast<ReduceOp>(response.op());
  // The options carry this allreduce's scaling for the call, set in place
  // and reset on return (between calls they carry none): a copy per call
  // would copy options_.hosts, as long as the job.
  collectives::CollectiveOptions& options = options_;
  options.postscale = response.postscale();
  absl::Cleanup unscaled = [&options] {
    options.postscale = 1.0;
    options.divisor = 1;
  };
  AverageAsSum(group.size(), &op, &options.postscale, &options.divisor);
  const std::string& row = response.names(0);
  AllreducePieces plan = PlanPieces(response, entries);
  GatherSmall(response, entries, plan);
  const auto& pieces = plan.pieces;
  if (response.prescale() != 1.0) {  // In place by now (PlanPieces).
    for (const collectives::AllreducePiece& p : pieces) {
      collectives::Scale(p.output, p.count, dtype, response.prescale());
    }
  }
  absl::Status status;
  if (group.size() == 1) {  // No context in a job of one.
    for (const collectives::AllreducePiece& p : pieces) {
      if (p.input != p.output) {
        CopyBytes(p.output, p.input, p.count * DataTypeSize(dtype));
      }
      collectives::Postscale(p.output, p.count, dtype, options.postscale,
                             options.divisor);
    }
  } else {
    timeline_->ActivityStart(row, "ALLREDUCE");
    // The collective applies options.postscale. One tensor in place (the
    // small-message case) needs no views of pieces.
    const bool one_in_place =
        pieces.size() == 1 && pieces[0].input == pieces[0].output;
    status = one_in_place
                 ? collectives::Allreduce(*context_, group, pieces[0].output,
                                          pieces[0].count, dtype, op, options)
                 : collectives::AllreduceMany(*context_, group, pieces, dtype,
                                              op, options);
    timeline_->ActivityEnd(row);
  }
  if (!status.ok()) return WithTensor(status, response, row);
  ScatterSmall(response, entries, plan);
  return absl::OkStatus();
}

absl::Status Executor::Allgather(const Response& response, TensorEntry& entry,
                                 const collectives::Group& group) {
  const size_t row_bytes = response.row_elems(0) * DataTypeSize(entry.dtype());
  std::vector<size_t> bytes(group.size());
  int64_t rows = 0;
  for (int m = 0; m < group.size(); ++m) {
    bytes[m] = response.sizes(m) * row_bytes;
    rows += response.sizes(m);
  }
  OpResult result;
  result.dtype = entry.dtype();
  result.shape = OutputShape(entry, rows);
  result.output = std::make_shared<HostBuffer>(rows * row_bytes);
  absl::Status status;
  if (group.size() == 1) {
    CopyBytes(result.output->data(), entry.input, bytes[0]);
  } else {
    status = collectives::Allgather(*context_, group, entry.input,
                                    result.output->data(), bytes, options_);
  }
  if (status.ok()) Complete(entry, status, std::move(result));
  return status;
}

absl::Status Executor::Broadcast(const Response& response, TensorEntry& entry,
                                 const collectives::Group& group) {
  if (entry.output != entry.input) {
    CopyBytes(entry.output, entry.input, entry.Bytes());
  }
  if (group.size() == 1) return absl::OkStatus();
  return collectives::Broadcast(*context_, group, entry.output, entry.Bytes(),
                                response.root(), options_);
}

absl::Status Executor::Alltoall(const Response& response, TensorEntry& entry,
                                const collectives::Group& group) {
  const int n = group.size();
  const size_t row_bytes = response.row_elems(0) * DataTypeSize(entry.dtype());
  std::vector<size_t> send(n), recv(n);
  OpResult result;
  int64_t rows = 0;
  for (int j = 0; j < n; ++j) {
    send[j] = response.sizes(group.index * n + j) * row_bytes;
    const int64_t in_rows = response.sizes(j * n + group.index);
    recv[j] = in_rows * row_bytes;
    result.received_splits.push_back(in_rows);
    rows += in_rows;
  }
  result.dtype = entry.dtype();
  result.shape = OutputShape(entry, rows);
  result.output = std::make_shared<HostBuffer>(rows * row_bytes);
  absl::Status status;
  if (n == 1) {
    CopyBytes(result.output->data(), entry.input, send[0]);
  } else {
    status = collectives::Alltoall(*context_, group, entry.input, send,
                                   result.output->data(), recv, options_);
  }
  if (status.ok()) Complete(entry, status, std::move(result));
  return status;
}

absl::Status Executor::ReduceScatter(const Response& response,
                                     TensorEntry& entry,
                                     const collectives::Group& group) {
  const int n = group.size();
  const DataType dtype = entry.dtype();
  const int64_t rows = response.sizes(0);
  const int64_t row_elems = response.row_elems(0);
  std::vector<size_t> counts(n);
  for (int m = 0; m < n; ++m) counts[m] = SplitRows(rows, n, m) * row_elems;
  ReduceOp op = static_cast<ReduceOp>(response.op());
  double postscale = response.postscale();
  int divisor = 1;
  AverageAsSum(n, &op, &postscale, &divisor);
  const void* input = entry.input;
  if (response.prescale() != 1.0) {
    void* scaled = FusionBuffer(entry.Bytes());
    CopyBytes(scaled, entry.input, entry.Bytes());
    collectives::Scale(scaled, entry.NumElements(), dtype, response.prescale());
    input = scaled;
  }
  OpResult result;
  result.dtype = dtype;
  result.shape = OutputShape(entry, SplitRows(rows, n, group.index));
  const size_t out_count = counts[group.index];
  result.output = std::make_shared<HostBuffer>(out_count * DataTypeSize(dtype));
  absl::Status status;
  if (n == 1) {
    CopyBytes(result.output->data(), input, out_count * DataTypeSize(dtype));
  } else {
    status = collectives::ReduceScatter(*context_, group, input,
                                        result.output->data(), counts, dtype,
                                        op, options_);
  }
  if (!status.ok()) return status;
  collectives::Postscale(result.output->data(), out_count, dtype, postscale,
                         divisor);
  Complete(entry, status, std::move(result));
  return status;
}

}  // namespace hvd::runtime
