#include "core/runtime/coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/logging.h"
#include "core/common/types.h"
#include "core/runtime/validation.h"

namespace hvd::runtime {
namespace {

Response ErrorResponse(const Request& request, std::string error) {
  Response response;
  response.set_type(request.type());
  response.add_names(request.name());
  response.set_process_set(request.process_set());
  response.set_error(std::move(error));
  return response;
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat("[", absl::StrJoin(ranks, ", "), "]");
}

bool Fusable(const Response& a, const Response& b) {
  return b.type() == ALLREDUCE && b.error().empty() &&
         a.process_set() == b.process_set() && a.dtype() == b.dtype() &&
         a.op() == b.op() && a.prescale() == b.prescale() &&
         a.postscale() == b.postscale() && a.device() == b.device() &&
         std::equal(a.joined().begin(), a.joined().end(), b.joined().begin(),
                    b.joined().end());
}

void Append(Response& into, Response& from) {
  for (std::string& n : *from.mutable_names()) into.add_names(std::move(n));
  for (int64_t s : from.sizes()) into.add_sizes(s);
  for (int32_t d : from.ndims()) into.add_ndims(d);
  for (int64_t d : from.dims()) into.add_dims(d);
}

}  // namespace

int64_t ResponseBytes(const Response& r) {
  int64_t elements = 0;
  for (int64_t s : r.sizes()) elements += s;
  return elements * static_cast<int64_t>(
                        DataTypeSize(static_cast<DataType>(r.dtype())));
}

Coordinator::Coordinator(CoordinatorOptions options,
                         const ProcessSetTable* sets,
                         const ResponseCache* cache, Timeline* timeline)
    : options_(options), sets_(sets), cache_(cache), timeline_(timeline) {}

ResponseList Coordinator::Compute(const std::vector<RequestList>& lists,
                                  absl::Time now) {
  ResponseList out;
  ++stats_.cycles;
  for (size_t r = 0; r < lists.size(); ++r) {
    if (lists[r].shutdown()) {
      out.set_shutdown(absl::StrCat("rank ", r, " shut hvd down"));
      return out;
    }
  }
  std::vector<Response> ready;
  for (size_t r = 0; r < lists.size(); ++r) {
    for (const Request& request : lists[r].requests()) {
      if (request.type() == JOIN) {
        joined_.insert(static_cast<int>(r));
        last_joined_ = static_cast<int>(r);
        continue;
      }
      AddRequest(request, /*from_bit=*/false, now);
      ++stats_.full_requests;
    }
  }
  ApplyCacheBits(lists, now, ready);
  CollectReady(ready);
  Fuse(std::move(ready), out);
  if (static_cast<int>(joined_.size()) == options_.size) AddJoinResponse(out);
  if (std::string stall = CheckStalls(now); !stall.empty()) {
    out.set_shutdown(stall);
  }
  out.set_idle(Idle(lists, out));
  return out;
}

bool Coordinator::Idle(const std::vector<RequestList>& lists,
                       const ResponseList& out) const {
  if (out.responses_size() > 0 || !out.shutdown().empty() || !table_.empty() ||
      !partial_bits_.empty() || !joined_.empty()) {
    return false;
  }
  for (const RequestList& list : lists) {
    if (Announces(list)) return false;
  }
  return sets_->EverySetHasEveryRank();
}

void Coordinator::AddRequest(const Request& request, bool from_bit,
                             absl::Time now) {
  Key key{request.process_set(), request.name()};
  auto [it, inserted] = table_.try_emplace(key);
  Pending& pending = it->second;
  if (inserted) {
    pending.first_seen = now;
    pending.last_warned = now;
    pending.order = next_order_++;
    timeline_->NegotiateStart(request.name(), OpTypeName(request.type()));
  }
  if (pending.by_rank.count(request.rank()) > 0) {
    if (from_bit && pending.from_bits.count(request.rank()) > 0) return;
    // Reported once every member has submitted, so every rank gets it.
    if (pending.error.empty()) {
      pending.error = absl::StrCat(
          "tensor '", request.name(), "' (", OpTypeName(request.type()),
          ") was submitted twice by rank ", request.rank(),
          " before the first submission completed");
    }
    return;
  }
  pending.by_rank[request.rank()] = request;
  if (from_bit) pending.from_bits.insert(request.rank());
  timeline_->NegotiateRankReady(request.name(), request.rank());
}

// Only slots some rank set a bit for, or that wait from an earlier cycle,
// can change anything: visiting just those (ascending, as a scan of every
// slot would) keeps a cycle's cost independent of the cache capacity.
std::vector<int> Coordinator::SlotsToVisit(
    const std::vector<RequestList>& lists) const {
  // One pass over each rank's bits into their union, then its set bits:
  // linear in the ranks, not in ranks x tensors.
  std::string any;
  for (const RequestList& list : lists) {
    const std::string& bits = list.cache_bits();
    if (bits.size() > any.size()) any.resize(bits.size(), 0);
    for (size_t byte = 0; byte < bits.size(); ++byte) any[byte] |= bits[byte];
  }
  std::vector<int> slots;
  for (int slot : SetSlots(any)) {
    if (slot < cache_->capacity()) slots.push_back(slot);
  }
  for (const auto& [slot, seen] : bit_first_seen_) slots.push_back(slot);
  for (const auto& [slot, with] : partial_bits_) slots.push_back(slot);
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return slots;
}

void Coordinator::ApplyCacheBits(const std::vector<RequestList>& lists,
                                 absl::Time now,
                                 std::vector<Response>& ready) {
  const std::vector<int> slots = SlotsToVisit(lists);
  // Ranks with the slot's bit, or joined: set and cleared slot by slot.
  std::vector<bool> in(lists.size(), false);
  for (int slot : slots) {
    std::vector<int> with;
    for (size_t r = 0; r < lists.size(); ++r) {
      if (GetBit(lists[r].cache_bits(), slot)) with.push_back(static_cast<int>(r));
    }
    const Request* cached = with.empty() ? nullptr : cache_->At(slot);
    partial_bits_.erase(slot);
    if (cached == nullptr) {
      bit_first_seen_.erase(slot);
      continue;
    }
    Key key{cached->process_set(), cached->name()};
    auto members = sets_->Ranks(key.first);
    if (!members) continue;
    if (table_.count(key) > 0 || bit_first_seen_.count(slot) > 0) {
      // Some rank sent (or will send) a full request, or the bits are not
      // complete yet: treat bits as requests so validation and stall checks
      // see every rank.
      for (int r : with) {
        Request request = *cached;
        request.set_rank(r);
        AddRequest(request, /*from_bit=*/true, now);
      }
      bit_first_seen_.erase(slot);
      continue;
    }
    std::vector<int> joined = JoinedMembers(*members);
    for (int r : with) in[r] = true;
    for (int r : joined) in[r] = true;
    const bool all = std::all_of(members->begin(), members->end(),
                                 [&](int m) { return in[m]; });
    for (int r : with) in[r] = false;
    for (int r : joined) in[r] = false;
    if (!all) {
      // Partial: hand over to the full path next cycle for stall tracking.
      bit_first_seen_[slot] = now;
      partial_bits_[slot] = with;
      continue;
    }
    // Only allreduces are cached, and every bit stands for the same request.
    ready.push_back(AgreedAllreduceResponse(*cached, joined));
    ++stats_.cached_ready;
  }
}

bool Coordinator::WaitingFor(int rank) const {
  if (joined_.count(rank) > 0) return false;
  auto member = [&](int set) {
    auto members = sets_->Ranks(set);
    return members && PositionIn(*members, rank) >= 0;
  };
  for (const auto& [key, pending] : table_) {
    if (pending.by_rank.count(rank) == 0 && member(key.first)) return true;
  }
  for (const auto& [slot, with] : partial_bits_) {
    const Request* cached = cache_->At(slot);
    if (cached != nullptr && std::count(with.begin(), with.end(), rank) == 0 &&
        member(cached->process_set())) {
      return true;
    }
  }
  return false;
}

std::vector<int> Coordinator::JoinedMembers(
    const std::vector<int>& members) const {
  std::vector<int> joined;
  for (int m : members) {
    if (joined_.count(m) > 0) joined.push_back(m);
  }
  return joined;
}

std::vector<int> Coordinator::MissingRanks(
    const Pending& pending, const std::vector<int>& members) const {
  std::vector<int> missing;
  for (int m : members) {
    if (pending.by_rank.count(m) == 0 && joined_.count(m) == 0) {
      missing.push_back(m);
    }
  }
  return missing;
}

// Only allreduce goes on with joined ranks (as in Horovod): any other
// collective of a set with a joined member fails. It is failed as soon as
// one rank asks, without waiting for the other live ranks: each of them
// gets its own error when its request comes, so ranks whose generated
// names have drifted apart (one joined while the others ran an unnamed op)
// cannot wait on each other forever.
bool Coordinator::FailsForJoinedRanks(const Pending& pending,
                                      const std::vector<int>& members) const {
  const OpType type = pending.by_rank.begin()->second.type();
  if (type != ALLGATHER && type != BROADCAST && type != ALLTOALL &&
      type != REDUCESCATTER) {
    return false;
  }
  return !JoinedMembers(members).empty();
}

void Coordinator::CollectReady(std::vector<Response>& ready) {
  std::vector<std::pair<int64_t, Key>> complete;
  std::map<Key, int> group_ready;  // (set, group) -> members ready
  for (const auto& [key, pending] : table_) {
    auto members = sets_->Ranks(key.first);
    if (members && !MissingRanks(pending, *members).empty() &&
        !FailsForJoinedRanks(pending, *members)) {
      continue;
    }
    complete.emplace_back(pending.order, key);
    const Request& any = pending.by_rank.begin()->second;
    if (any.group_size() > 1) ++group_ready[{key.first, any.group()}];
  }
  std::sort(complete.begin(), complete.end());
  for (const auto& [order, key] : complete) {
    const Pending& pending = table_.at(key);
    const Request& any = pending.by_rank.begin()->second;
    if (any.group_size() > 1 &&
        group_ready[{key.first, any.group()}] < any.group_size()) {
      continue;  // The group completes together.
    }
    ready.push_back(MakeResponse(key, pending));
    timeline_->NegotiateEnd(key.second);
    table_.erase(key);
  }
}

Response Coordinator::MakeResponse(const Key& key, const Pending& pending) {
  const Request& any = pending.by_rank.begin()->second;
  if (!pending.error.empty()) return ErrorResponse(any, pending.error);
  auto members = sets_->Ranks(key.first);
  if (!members) {
    return ErrorResponse(any, absl::StrCat("process set ", key.first,
                                           " does not exist (removed?)"));
  }
  Response response =
      BuildResponse(pending.by_rank, *members, JoinedMembers(*members));
  if (!response.error().empty()) return response;
  if (any.type() == ADD_PROCESS_SET) {
    std::vector<int> ranks(any.set_ranks().begin(), any.set_ranks().end());
    if (int existing = sets_->Find(ranks); existing >= 0) {
      response.set_error(absl::StrCat("a process set with ranks ",
                                      RankList(ranks), " already exists (id ",
                                      existing, ")"));
    } else {
      response.set_new_set_id(next_set_id_++);
    }
  } else if (any.type() == REMOVE_PROCESS_SET) {
    if (any.root() == 0 || !sets_->Ranks(any.root())) {
      response.set_error(absl::StrCat("cannot remove process set ", any.root(),
                                      ": ", any.root() == 0
                                                ? "it is the global set"
                                                : "no such set"));
    }
  }
  return response;
}

void FuseResponses(std::vector<Response> ready, int64_t fusion_threshold,
                   ResponseList& out) {
  std::vector<bool> used(ready.size(), false);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (used[i]) continue;
    Response fused = std::move(ready[i]);
    if (fused.type() == ALLREDUCE && fused.error().empty() &&
        fusion_threshold > 0) {
      int64_t bytes = ResponseBytes(fused);
      for (size_t j = i + 1; j < ready.size(); ++j) {
        if (used[j] || !Fusable(fused, ready[j])) continue;
        const int64_t more = ResponseBytes(ready[j]);
        if (bytes + more > fusion_threshold) continue;
        Append(fused, ready[j]);
        bytes += more;
        used[j] = true;
      }
    }
    *out.add_responses() = std::move(fused);
  }
}

ResponseList CachedStepResponses(const std::string& bits,
                                 const ResponseCache& cache,
                                 const ProcessSetTable& sets,
                                 int64_t fusion_threshold) {
  ResponseList out;
  const auto members = sets.Ranks(0);
  if (!members) return out;
  const std::vector<int> slots = SetSlots(bits);
  std::vector<Response> ready;
  ready.reserve(slots.size());
  for (int slot : slots) {
    const Request* cached = cache.At(slot);
    if (cached == nullptr || cached->process_set() != 0) return {};
    ready.push_back(AgreedAllreduceResponse(*cached, {}));
  }
  FuseResponses(std::move(ready), fusion_threshold, out);
  return out;
}

const ResponseList& CachedStepMemo::For(const std::string& bits,
                                        const ResponseCache& cache,
                                        const ProcessSetTable& sets,
                                        int64_t fusion_threshold) {
  if (cache.generation() != generation_ ||
      fusion_threshold != fusion_threshold_) {
    kept_.clear();
    generation_ = cache.generation();
    fusion_threshold_ = fusion_threshold;
  }
  ++uses_;
  Kept* slot = nullptr;
  for (Kept& kept : kept_) {
    if (kept.bits == bits) {
      kept.last_use = uses_;
      return kept.responses;
    }
    if (slot == nullptr || kept.last_use < slot->last_use) slot = &kept;
  }
  if (kept_.size() < static_cast<size_t>(kCapacity)) {
    slot = &kept_.emplace_back();
  }
  ++built_;
  slot->bits = bits;
  slot->responses = CachedStepResponses(bits, cache, sets, fusion_threshold);
  slot->last_use = uses_;
  return slot->responses;
}

void Coordinator::Fuse(std::vector<Response> ready, ResponseList& out) {
  const int before = out.responses_size();
  FuseResponses(std::move(ready), options_.fusion_threshold, out);
  CountResponses(out, before);
}

void Coordinator::CountCachedStep(const ResponseList& out) {
  ++stats_.cycles;
  ++stats_.agreed_steps;
  for (const Response& response : out.responses()) {
    stats_.cached_ready += response.names_size();
  }
  CountResponses(out, 0);
}

void Coordinator::CountResponses(const ResponseList& out, int from) {
  for (int i = from; i < out.responses_size(); ++i) {
    ++stats_.responses;
    const int names = out.responses(i).names_size();
    if (names > 1) stats_.fused_tensors += names;
  }
}

void Coordinator::AddJoinResponse(ResponseList& out) {
  Response* response = out.add_responses();
  response->set_type(JOIN);
  response->set_last_joined(last_joined_);
  joined_.clear();
  last_joined_ = -1;
}

std::string Coordinator::CheckStalls(absl::Time now) {
  stalled_.clear();
  if (options_.stall_check_time <= absl::ZeroDuration()) return "";
  for (auto& [key, pending] : table_) {
    const absl::Duration age = now - pending.first_seen;
    if (age < options_.stall_check_time) continue;
    auto members = sets_->Ranks(key.first);
    if (!members) continue;
    std::vector<int> submitted;
    for (const auto& [rank, request] : pending.by_rank) submitted.push_back(rank);
    const std::string what = absl::StrCat(
        "tensor '", key.second, "' (",
        OpTypeName(pending.by_rank.begin()->second.type()), ", process set ",
        key.first, ") has been submitted by ranks ", RankList(submitted),
        " but not by ranks ", RankList(MissingRanks(pending, *members)),
        " for ", absl::ToInt64Seconds(age), " s");
    if (stalled_.empty()) stalled_ = what;
    if (options_.stall_shutdown_time > absl::ZeroDuration() &&
        age >= options_.stall_shutdown_time) {
      return absl::StrCat(kStallShutdownPrefix, what,
                          " (HVD_STALL_SHUTDOWN_TIME_SECONDS)");
    }
    if (now - pending.last_warned >= options_.stall_check_time ||
        pending.last_warned == pending.first_seen) {
      pending.last_warned = now;
      HVD_LOG(WARNING) << "Stall detected: " << what
                       << ". The missing ranks may be waiting for other "
                          "tensors, or their collective calls diverged.";
    }
  }
  return "";
}

}  // namespace hvd::runtime
