// The rendezvous store's RPCs: Set, Get, GetMany and Barrier, within the
// bounds of RendezvousLimits.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/rendezvous/rendezvous_server_impl.h"

namespace hvd {

using rendezvous::kBarrierArrivedKey;
using rendezvous::kMaxGetManyAnswerBytes;
using rendezvous::kMaxKeysPerGetMany;
using rendezvous_internal::Quote;
using rendezvous_internal::Refused;
namespace pb = ::hvd::rendezvous;

grpc::Status RendezvousServer::Impl::CheckName(absl::string_view what,
                                               absl::string_view name) const {
  if (name.size() <= options_.limits.max_key_bytes) return grpc::Status::OK;
  return Refused(grpc::StatusCode::INVALID_ARGUMENT,
                 absl::StrCat(what, " ", Quote(name),
                              " is longer than the "
                              "rendezvous server's limit of ",
                              options_.limits.max_key_bytes, " bytes"));
}

grpc::Status RendezvousServer::Impl::CheckCanBlock() const {
  if (blocked_ < max_blocked_calls_) return grpc::Status::OK;
  return Refused(grpc::StatusCode::RESOURCE_EXHAUSTED,
                 absl::StrCat("the rendezvous server already has ", blocked_,
                              " waiting Get and Barrier calls, its limit"));
}

void RendezvousServer::Impl::Set(Call& call, const pb::SetRequest& request) {
  const std::string& key = request.key();
  if (grpc::Status s = CheckName("key", key); !s.ok()) return call.Answer(s);
  Answers woken;
  {
    absl::MutexLock lock(&mu_);
    auto it = values_.find(key);
    const size_t old_bytes =
        it == values_.end() ? 0 : key.size() + it->second.size();
    const size_t new_bytes = key.size() + request.value().size();
    if (store_bytes_ - old_bytes + new_bytes >
        options_.limits.max_store_bytes) {
      return call.Answer(Refused(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("storing ", request.value().size(), " bytes at key ",
                       Quote(key),
                       " would take the rendezvous store past its limit of ",
                       options_.limits.max_store_bytes, " bytes (",
                       store_bytes_, " in use)")));
    }
    store_bytes_ = store_bytes_ - old_bytes + new_bytes;
    values_[key] = request.value();
    WakeLocked(KeyTopic(key), woken);
  }
  call.Answer(grpc::Status::OK);
  Deliver(woken);
}

void RendezvousServer::Impl::Get(Call& call, const pb::GetRequest& request) {
  const std::string& key = request.key();
  if (grpc::Status s = CheckName("key", key); !s.ok()) return call.Answer(s);
  Wait wait;
  wait.wait = WaitOf(request.timeout_ms());
  auto& response = call.response<pb::GetResponse>();
  wait.ready = [this, key, &response]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = values_.find(key);
    if (it == values_.end()) return false;
    response.set_value(it->second);
    return true;
  };
  wait.topic = [key] { return KeyTopic(key); };
  wait.expired = [key, duration = wait.wait] {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("key ", Quote(key), " not set within ",
                                     absl::FormatDuration(duration)));
  };
  AnswerOrWait(call, std::move(wait));
}

void RendezvousServer::Impl::GetMany(Call& call,
                                     const pb::GetManyRequest& request) {
  const auto& asked = request.keys();
  if (asked.size() > kMaxKeysPerGetMany) {
    return call.Answer(Refused(grpc::StatusCode::INVALID_ARGUMENT,
                               absl::StrCat("GetMany asks for ", asked.size(),
                                            " keys; one call answers at most ",
                                            kMaxKeysPerGetMany)));
  }
  for (const std::string& key : asked) {
    if (grpc::Status s = CheckName("key", key); !s.ok()) {
      return call.Answer(s);
    }
  }
  // Keys [unchecked, size) are known to be set (nothing is ever removed).
  // A call waits for the last key not yet seen: with the keys arriving in
  // a random order it is woken about ln(keys) times, not once per key.
  struct Keys {
    std::vector<std::string> keys;
    size_t unchecked;
  };
  auto keys = std::make_shared<Keys>();
  keys->keys.assign(asked.begin(), asked.end());
  keys->unchecked = keys->keys.size();
  Wait wait;
  wait.wait = WaitOf(request.timeout_ms());
  auto& response = call.response<pb::GetManyResponse>();
  wait.ready = [this, keys, &response]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (keys->unchecked > 0 &&
           values_.count(keys->keys[keys->unchecked - 1]) > 0) {
      --keys->unchecked;
    }
    if (keys->unchecked > 0) return false;
    // The first keys' values that fit one answer, and always the first's.
    size_t bytes = 0;
    for (const std::string& key : keys->keys) {
      const std::string& value = values_[key];
      bytes += value.size();
      if (bytes > kMaxGetManyAnswerBytes && response.values_size() > 0) break;
      response.add_values(value);
    }
    return true;
  };
  wait.topic = [keys] { return KeyTopic(keys->keys[keys->unchecked - 1]); };
  wait.expired = [this, keys,
                  duration = wait.wait]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int missing = 0;
    const std::string* first = nullptr;
    for (const std::string& key : keys->keys) {
      if (values_.count(key) > 0) continue;
      if (first == nullptr) first = &key;
      ++missing;
    }
    return grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        absl::StrCat("key ", Quote(*first), " and ", missing - 1,
                     " other(s) of ", keys->keys.size(), " not set within ",
                     absl::FormatDuration(duration)));
  };
  AnswerOrWait(call, std::move(wait));
}

grpc::Status RendezvousServer::Impl::CheckBarrier(
    const pb::BarrierRequest& request) const {
  if (grpc::Status s = CheckName("barrier", request.name()); !s.ok()) return s;
  if (grpc::Status s = CheckName("participant", request.participant());
      !s.ok()) {
    return s;
  }
  const std::string name = Quote(request.name());
  if (request.count() <= 0) {
    return Refused(grpc::StatusCode::INVALID_ARGUMENT,
                   absl::StrCat("barrier ", name, ": count ", request.count(),
                                " must be positive"));
  }
  if (options_.size > 0 && request.count() > options_.size) {
    return Refused(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("barrier ", name, ": count ", request.count(),
                     " is more than the job's ", options_.size, " processes"));
  }
  return grpc::Status::OK;
}

grpc::Status RendezvousServer::Impl::ArriveLocked(
    const pb::BarrierRequest& request, bool will_wait, BarrierState** arrived) {
  auto it = barriers_.find(request.name());
  if (it != barriers_.end() && it->second.count != request.count()) {
    return Refused(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("this caller expects ", request.count(),
                     " participants, an earlier one ", it->second.count));
  }
  const bool is_new = it == barriers_.end();
  const bool new_participant =
      request.participant().empty() ||
      (is_new || it->second.participants.count(request.participant()) == 0);
  const int arrived_after =
      (is_new ? 0 : it->second.arrived()) + (new_participant ? 1 : 0);
  if (will_wait && arrived_after < request.count()) {
    if (grpc::Status s = CheckCanBlock(); !s.ok()) return s;
  }
  const size_t bytes = (is_new ? request.name().size() : 0) +
                       (new_participant ? request.participant().size() : 0);
  if (store_bytes_ + bytes > options_.limits.max_store_bytes) {
    return Refused(grpc::StatusCode::RESOURCE_EXHAUSTED,
                   absl::StrCat("barrier ", Quote(request.name()),
                                " would take the rendezvous store past its "
                                "limit of ",
                                options_.limits.max_store_bytes, " bytes"));
  }
  store_bytes_ += bytes;
  BarrierState& barrier = barriers_[request.name()];  // map nodes are stable
  barrier.count = request.count();
  if (request.participant().empty()) {
    ++barrier.anonymous;
  } else {
    barrier.participants.insert(request.participant());
  }
  *arrived = &barrier;
  return grpc::Status::OK;
}

void RendezvousServer::Impl::Barrier(Call& call,
                                     const pb::BarrierRequest& request) {
  if (grpc::Status s = CheckBarrier(request); !s.ok()) return call.Answer(s);
  Wait wait;
  wait.wait = WaitOf(request.timeout_ms());
  std::optional<grpc::Status> now;
  Answers woken;
  {
    absl::MutexLock lock(&mu_);
    BarrierState* barrier = nullptr;
    if (grpc::Status s =
            ArriveLocked(request, wait.wait > absl::ZeroDuration(), &barrier);
        !s.ok()) {
      now = s;
    } else {
      const std::string& name = request.name();
      auto& response = call.response<pb::BarrierResponse>();
      wait.ready = [barrier, &response] {
        response.set_arrived(barrier->arrived());
        return barrier->arrived() >= barrier->count;
      };
      wait.topic = [name] { return BarrierTopic(name); };
      wait.expired = [barrier, name, &call, duration = wait.wait] {
        call.context().AddTrailingMetadata(kBarrierArrivedKey,
                                           absl::StrCat(barrier->arrived()));
        return grpc::Status(
            grpc::StatusCode::DEADLINE_EXCEEDED,
            absl::StrCat("barrier ", Quote(name), ": ", barrier->arrived(),
                         " of ", barrier->count, " arrived within ",
                         absl::FormatDuration(duration)));
      };
      if (barrier->arrived() >= barrier->count) {
        WakeLocked(BarrierTopic(name), woken);
      }
      now = WaitLocked(call, std::move(wait));
    }
  }
  Deliver(woken);
  if (now) call.Answer(*now);
}

}  // namespace hvd
