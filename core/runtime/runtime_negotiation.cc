// The negotiation half of Runtime's cycle: which of this rank's tensors go
// to rank 0 (in full, or as response-cache bits), rank 0 gathering every
// rank's lists and answering, and the other ranks passing their subtree's
// lists up the negotiation tree and the answer down (negotiation_tree.h).
// Before that, a step of cached tensors only is agreed by one exchange
// among all ranks when it can be (AgreeCachedStep).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/collectives/doubling_layout.h"
#include "core/common/annotate.h"
#include "core/runtime/negotiation_tree.h"
#include "core/runtime/response_cache.h"
#include "core/runtime/runtime.h"

namespace hvd::runtime {
namespace {

// What a rank says in the cached-step exchange, for itself and the ranks
// it has heard from: whether all of them may agree on a cached step, and
// the cache bits all of them set and those any of them set (`all` and
// `any` always of one length).
struct Votes {
  bool may = false;
  std::string all;  // AND of the bits
  std::string any;  // OR of the bits
};

// The flag byte, then `all` and `any`.
std::string Encode(const Votes& v) {
  return std::string(1, v.may ? 1 : 0) + v.all + v.any;
}

absl::StatusOr<Votes> Decode(const std::string& bytes, int from) {
  if (bytes.size() % 2 != 1) {
    return absl::DataLossError(
        absl::StrCat("malformed cached-step vote from rank ", from));
  }
  const size_t n = bytes.size() / 2;
  return Votes{bytes[0] != 0, bytes.substr(1, n), bytes.substr(1 + n, n)};
}

Votes Combine(Votes a, const Votes& b) {
  const size_t n = std::max(a.all.size(), b.all.size());
  a.all.resize(n, 0);
  a.any.resize(n, 0);
  for (size_t i = 0; i < n; ++i) {
    a.all[i] = static_cast<char>(a.all[i] & (i < b.all.size() ? b.all[i] : 0));
    a.any[i] = static_cast<char>(a.any[i] | (i < b.any.size() ? b.any[i] : 0));
  }
  a.may = a.may && b.may;
  return a;
}

// A failed negotiation wait leaves the step's other requests posted,
// writing into or reading from buffers that die when the step returns: the
// context is aborted first (the job fails with this status anyway). Returns
// `failure`.
absl::Status AbortedFor(transport::Context& context, absl::Status failure) {
  context.Abort(failure);
  return failure;
}

// Recursive doubling in the collectives' layout (DoublingLayout): the ranks
// of a folded pair combine first, the one standing in for both swaps with
// the rank whose position differs in one bit, log2 P rounds, and hands the
// result back. Each swap combines (Combine is commutative and
// associative), so every rank ends with the same votes.
// Waits are named from `start`.
absl::StatusOr<Votes> ExchangeVotes(transport::Context& context, int rank,
                                    int size,
                                    const transport::WaitLimits& limits,
                                    absl::Time start, Votes mine) {
  const collectives::DoublingLayout layout(size);
  // Sends `mine` to `peer` when `send`, and receives its votes when
  // `receive`, combining them into `mine`.
  auto swap = [&](int peer, bool send, bool receive) -> absl::Status {
    const std::string out = send ? Encode(mine) : std::string();
    std::string in;
    std::unique_ptr<transport::Request> sent, received;
    if (send) sent = context.Send(peer, out.data(), out.size());
    if (receive) received = context.RecvAny(peer, &in);
    for (transport::Request* r : {sent.get(), received.get()}) {
      if (r == nullptr) continue;
      if (absl::Status s =
              transport::WaitNamingStalls(*r, start, limits, "negotiation");
          !s.ok()) {
        return AbortedFor(context, Annotate(s, absl::StrCat(
                                                "negotiation with rank ",
                                                peer, " failed")));
      }
    }
    if (!receive) return absl::OkStatus();
    absl::StatusOr<Votes> theirs = Decode(in, peer);
    if (!theirs.ok()) return theirs.status();
    mine = Combine(std::move(mine), *theirs);
    return absl::OkStatus();
  };
  if (layout.FoldedOut(rank)) {
    // The partner's first message back is the result, which already holds
    // these votes: combining them again changes nothing.
    if (absl::Status s = swap(rank + 1, /*send=*/true, /*receive=*/true);
        !s.ok()) {
      return s;
    }
    return mine;
  }
  if (layout.FoldedIn(rank)) {
    if (absl::Status s = swap(rank - 1, false, true); !s.ok()) return s;
  }
  const int v = layout.Position(rank);
  for (int mask = 1; mask < layout.p; mask <<= 1) {
    if (absl::Status s = swap(layout.Member(v ^ mask), true, true); !s.ok()) {
      return s;
    }
  }
  if (layout.FoldedIn(rank)) {
    if (absl::Status s = swap(rank - 1, true, false); !s.ok()) return s;
  }
  return mine;
}

// Every rank may agree, and every rank set the same bits, some.
bool Agreed(const Votes& v) {
  return v.may && v.all == v.any &&
         std::any_of(v.all.begin(), v.all.end(), [](char c) { return c; });
}

absl::StatusOr<ResponseList> Parse(const std::string& bytes, int from) {
  ResponseList list;
  if (!list.ParseFromString(bytes)) {
    return absl::DataLossError(
        absl::StrCat("malformed negotiation message from rank ", from));
  }
  return list;
}

// Waits for requests[i], one per child, from `start`, naming the child
// that failed (the context aborted, AbortedFor).
absl::Status WaitEach(
    transport::Context& context,
    const std::vector<std::unique_ptr<transport::Request>>& requests,
    const std::vector<int>& children, absl::Time start,
    const transport::WaitLimits& limits) {
  for (size_t i = 0; i < children.size(); ++i) {
    if (absl::Status s = transport::WaitNamingStalls(*requests[i], start,
                                                     limits, "negotiation");
        !s.ok()) {
      return AbortedFor(
          context,
          Annotate(s, absl::StrCat("negotiation with rank ", children[i],
                                   " failed")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// Rank 0's cycle: gather one list from every peer (each sends when it has
// work, at its cycle timer, or at once while its tensors wait for others),
// so rank 0 never sleeps on a timer while a peer waits for it. If then
// nothing is ready only because rank 0 itself has not submitted a tensor
// that others have, hold the answer up to HVD_CYCLE_TIME for that
// submission rather than send every peer back to wait a cycle.
absl::StatusOr<const ResponseList*> Runtime::CoordinatorCycle(bool* busy) {
  const int size = config_.size;
  // Rank 0's list as the exchange saw it: the first of the hold loop's.
  std::optional<RequestList> voted;
  if (VotesFirst()) {
    voted = BuildRequests();
    voted->set_shutdown(StopRequested());
    absl::StatusOr<const ResponseList*> agreed = AgreeCachedStep(*voted);
    if (!agreed.ok()) return agreed.status();
    if (*agreed != nullptr) {
      *busy = true;
      timeline_.MarkCycle();
      return agreed;
    }
  }
  std::vector<RequestList> lists(size);
  absl::StatusOr<std::vector<std::string>> raw = GatherLists();
  if (!raw.ok()) return raw.status();
  for (int r = 1; r < size; ++r) {
    if (!lists[r].ParseFromString((*raw)[r])) {
      return absl::DataLossError(
          absl::StrCat("malformed negotiation message from rank ", r));
    }
    *busy |= Announces(lists[r]);
  }
  timeline_.MarkCycle();
  const absl::Time hold_end = absl::Now() + config_.cycle_time;
  ResponseList result;
  while (true) {
    const bool stop = StopRequested();
    lists[0] = BuildRequests();
    if (voted) {
      // What the vote took from the queue comes first, as it came first.
      for (Request& r : *lists[0].mutable_requests()) {
        *voted->add_requests() = std::move(r);
      }
      voted->set_cache_bits(lists[0].cache_bits());
      lists[0] = *std::move(voted);
      voted.reset();
    }
    lists[0].set_shutdown(stop);
    *busy |= Announces(lists[0]);
    result = coordinator_->Compute(lists, absl::Now());
    if (Reports()) metrics_.Stall(coordinator_->stalled());
    if (result.responses_size() > 0 || !result.shutdown().empty() ||
        !coordinator_->WaitingFor(0) || absl::Now() >= hold_end) {
      break;
    }
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stop_requested_ || aborted_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), hold_end);
    }
    if (absl::Status aborted = AbortStatus(); !aborted.ok()) return aborted;
    // The coordinator has the peers' requests now; their cache bits still
    // count, as every cycle.
    for (int r = 1; r < size; ++r) lists[r].clear_requests();
  }
  if (autotuner_) {
    if (std::optional<Tuning> t = autotuner_->Observe(result, absl::Now())) {
      *result.mutable_tuning() = *std::move(t);
    }
  }
  const std::string reply = result.SerializeAsString();
  if (absl::Status s = SendToChildren(
          NegotiationChildren(0, size, config_.negotiation_fanout), reply);
      !s.ok()) {
    return s;
  }
  negotiated_ = std::move(result);
  return &negotiated_;
}

absl::StatusOr<const ResponseList*> Runtime::MemberCycle(bool waited,
                                                         bool* busy) {
  const bool stop = resend_now_ || waited ? StopRequested()
                                          : WaitForWork(CycleEnd(), last_busy_);
  if (absl::Status aborted = AbortStatus(); !aborted.ok()) return aborted;
  cycle_start_ = absl::Now();
  timeline_.MarkCycle();
  RequestList mine = BuildRequests();
  mine.set_shutdown(stop);
  *busy = Announces(mine);
  absl::StatusOr<const ResponseList*> step = AgreeCachedStep(mine);
  if (step.ok() && *step == nullptr) step = Negotiate(mine);
  return step;
}

absl::StatusOr<std::vector<std::string>> Runtime::GatherLists() {
  const int size = config_.size;
  const std::vector<int> children =
      NegotiationChildren(0, size, config_.negotiation_fanout);
  std::vector<std::string> bundles;
  if (absl::Status s = ReceiveBundles(children, absl::Now(), &bundles);
      !s.ok()) {
    return s;
  }
  std::vector<std::string> raw(size);
  std::vector<bool> filled(size, false);
  filled[0] = true;
  for (size_t i = 0; i < children.size(); ++i) {
    if (absl::Status s = SplitBundle(bundles[i], children[i], &raw, &filled);
        !s.ok()) {
      return s;
    }
  }
  for (int r = 1; r < size; ++r) {
    if (!filled[r]) {
      return absl::DataLossError(
          absl::StrCat("negotiation: no list from rank ", r, " this cycle"));
    }
  }
  return raw;
}

absl::Status Runtime::ReceiveBundles(const std::vector<int>& children,
                                     absl::Time start,
                                     std::vector<std::string>* bundles) {
  bundles->assign(children.size(), std::string());
  std::vector<std::unique_ptr<transport::Request>> recvs;
  for (size_t i = 0; i < children.size(); ++i) {
    recvs.push_back(parts_.context->RecvAny(children[i], &(*bundles)[i]));
  }
  return WaitEach(*parts_.context, recvs, children, start, wait_limits_);
}

absl::Status Runtime::SendToChildren(const std::vector<int>& children,
                                     const std::string& reply) {
  std::vector<std::unique_ptr<transport::Request>> sends;
  for (int child : children) {
    sends.push_back(parts_.context->Send(child, reply.data(), reply.size()));
  }
  return WaitEach(*parts_.context, sends, children, absl::Now(),
                  wait_limits_);
}

RequestList Runtime::BuildRequests() {
  std::vector<std::unique_ptr<TensorEntry>> fresh;
  {
    absl::MutexLock lock(&mu_);
    fresh.swap(queue_);
    has_work_.store(false, std::memory_order_relaxed);
  }
  RequestList list;
  for (auto& entry : fresh) {
    const Request& request = entry->request;
    std::pair<int, std::string> key{request.process_set(), request.name()};
    if (request.type() == JOIN) key = {0, kJoinName};
    const bool duplicate = pending_.count(key) > 0;
    const bool cacheable =
        request.type() == ALLREDUCE && request.group_size() <= 1 && !duplicate;
    entry->cache_slot = cacheable ? cache_.Lookup(request) : -1;
    if (entry->cache_slot < 0) *list.add_requests() = request;
    pending_[key].push_back(std::move(entry));
  }
  std::string bits;
  for (auto& [key, entries] : pending_) {
    for (auto& entry : entries) {
      if (entry->cache_slot < 0) continue;
      if (cache_.Lookup(entry->request) != entry->cache_slot) {
        entry->cache_slot = -1;  // Evicted meanwhile: negotiate in full.
        *list.add_requests() = entry->request;
      } else {
        SetBit(bits, entry->cache_slot);
      }
    }
  }
  list.set_cache_bits(bits);
  return list;
}

absl::StatusOr<const ResponseList*> Runtime::Negotiate(
    const RequestList& mine) {
  if (config_.size == 1) {
    negotiated_ = coordinator_->Compute({mine}, cycle_start_);
    return &negotiated_;
  }
  const absl::Time start = cycle_start_;
  const int fanout = config_.negotiation_fanout;
  const int parent = NegotiationParent(config_.rank, fanout);
  const std::vector<int> children =
      NegotiationChildren(config_.rank, config_.size, fanout);
  std::string up;
  AppendToBundle(config_.rank, mine.SerializeAsString(), &up);
  std::vector<std::string> bundles;
  if (absl::Status s = ReceiveBundles(children, start, &bundles); !s.ok()) {
    return s;
  }
  for (const std::string& bundle : bundles) up += bundle;
  std::string in;
  auto send = parts_.context->Send(parent, up.data(), up.size());
  auto recv = parts_.context->RecvAny(parent, &in);
  absl::Status s =
      transport::WaitNamingStalls(*send, start, wait_limits_, "negotiation");
  if (s.ok()) {
    s = transport::WaitNamingStalls(*recv, start, wait_limits_, "negotiation");
  }
  if (!s.ok()) {
    return AbortedFor(*parts_.context,
                      Annotate(s, absl::StrCat("negotiation with rank ",
                                               parent, " failed")));
  }
  if (s = SendToChildren(children, in); !s.ok()) return s;
  absl::StatusOr<ResponseList> answer = Parse(in, parent);
  if (!answer.ok()) return answer.status();
  negotiated_ = *std::move(answer);
  return &negotiated_;
}

absl::StatusOr<const ResponseList*> Runtime::AgreeCachedStep(
    const RequestList& mine) {
  if (!VotesFirst()) return nullptr;
  // Anything but bits, or state on rank 0 from earlier cycles (tensors some
  // ranks have not submitted, joined ranks, an autotuner still sampling),
  // needs the coordinator.
  Votes votes;
  votes.may = mine.requests_size() == 0 && !mine.shutdown() &&
              (coordinator_ == nullptr || coordinator_->Settled()) &&
              (autotuner_ == nullptr || autotuner_->frozen());
  votes.all = votes.any = mine.cache_bits();
  absl::StatusOr<Votes> agreed =
      config_.size == 1
          ? std::move(votes)
          : ExchangeVotes(*parts_.context, config_.rank, config_.size,
                          wait_limits_, cycle_start_, std::move(votes));
  if (!agreed.ok()) return agreed.status();
  if (!Agreed(*agreed)) return nullptr;
  const ResponseList& out =
      cached_steps_.For(agreed->all, cache_, sets_, config_.fusion_threshold);
  // Every rank has the same cache, so every rank gets the same answer.
  if (out.responses_size() == 0) return nullptr;
  if (coordinator_) coordinator_->CountCachedStep(out);
  return &out;
}

}  // namespace hvd::runtime
