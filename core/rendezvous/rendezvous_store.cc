// The rendezvous store's RPCs: Set, Get, GetMany and Barrier, within the
// bounds of RendezvousLimits.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/rendezvous/rendezvous_server_impl.h"

namespace hvd {

using rendezvous::kBarrierArrivedKey;
using rendezvous::kMaxGetManyAnswerBytes;
using rendezvous::kMaxKeysPerGetMany;
using rendezvous_internal::kMaxWait;
using rendezvous_internal::Quote;
using rendezvous_internal::Refused;
using rendezvous_internal::ToGrpc;
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

grpc::Status RendezvousServer::Impl::Set(grpc::ServerContext* /*context*/,
                                         const pb::SetRequest* request,
                                         pb::SetResponse* /*response*/) {
  const std::string& key = request->key();
  if (grpc::Status s = CheckName("key", key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = values_.find(key);
  const size_t old_bytes =
      it == values_.end() ? 0 : key.size() + it->second.size();
  const size_t new_bytes = key.size() + request->value().size();
  if (store_bytes_ - old_bytes + new_bytes > options_.limits.max_store_bytes) {
    return Refused(grpc::StatusCode::RESOURCE_EXHAUSTED,
                   absl::StrCat("storing ", request->value().size(),
                                " bytes at key ", Quote(key),
                                " would take the rendezvous store past its "
                                "limit of ",
                                options_.limits.max_store_bytes, " bytes (",
                                store_bytes_, " in use)"));
  }
  store_bytes_ = store_bytes_ - old_bytes + new_bytes;
  values_[key] = request->value();
  WakeLocked(KeyTopic(key));
  return grpc::Status::OK;
}

grpc::Status RendezvousServer::Impl::Get(grpc::ServerContext* context,
                                         const pb::GetRequest* request,
                                         pb::GetResponse* response) {
  const std::string& key = request->key();
  if (grpc::Status s = CheckName("key", key); !s.ok()) return s;
  const absl::Duration wait =
      std::clamp(absl::Milliseconds(request->timeout_ms()),
                 absl::ZeroDuration(), kMaxWait);
  absl::MutexLock lock(&mu_);
  auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return values_.count(key) > 0;
  };
  if (!present() && wait > absl::ZeroDuration()) {
    if (grpc::Status s = CheckCanBlock(); !s.ok()) return s;
  }
  absl::Status status =
      WaitLocked(context, wait, present, [&] { return KeyTopic(key); });
  if (status.ok()) {
    response->set_value(values_[key]);
    return grpc::Status::OK;
  }
  if (absl::IsDeadlineExceeded(status)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("key ", Quote(key), " not set within ",
                                     absl::FormatDuration(wait)));
  }
  return ToGrpc(status);
}

grpc::Status RendezvousServer::Impl::GetMany(grpc::ServerContext* context,
                                             const pb::GetManyRequest* request,
                                             pb::GetManyResponse* response) {
  const auto& keys = request->keys();
  if (keys.size() > kMaxKeysPerGetMany) {
    return Refused(grpc::StatusCode::INVALID_ARGUMENT,
                   absl::StrCat("GetMany asks for ", keys.size(),
                                " keys; one call answers at most ",
                                kMaxKeysPerGetMany));
  }
  for (const std::string& key : keys) {
    if (grpc::Status s = CheckName("key", key); !s.ok()) return s;
  }
  const absl::Duration wait =
      std::clamp(absl::Milliseconds(request->timeout_ms()),
                 absl::ZeroDuration(), kMaxWait);
  absl::MutexLock lock(&mu_);
  // Keys [unchecked, size) are known to be set (nothing is ever removed).
  // A call waits for the last key not yet seen: with the keys arriving in
  // a random order it is woken about ln(keys) times, not once per key.
  int unchecked = keys.size();
  auto all_present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (unchecked > 0 && values_.count(keys[unchecked - 1]) > 0) {
      --unchecked;
    }
    return unchecked == 0;
  };
  if (!all_present() && wait > absl::ZeroDuration()) {
    if (grpc::Status s = CheckCanBlock(); !s.ok()) return s;
  }
  absl::Status status = WaitLocked(context, wait, all_present, [&] {
    return KeyTopic(keys[unchecked - 1]);
  });
  if (absl::IsDeadlineExceeded(status)) {
    int missing = 0;
    const std::string* first = nullptr;
    for (const std::string& key : keys) {
      if (values_.count(key) > 0) continue;
      if (first == nullptr) first = &key;
      ++missing;
    }
    return grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        absl::StrCat("key ", Quote(*first), " and ", missing - 1,
                     " other(s) of ", keys.size(), " not set within ",
                     absl::FormatDuration(wait)));
  }
  if (!status.ok()) return ToGrpc(status);
  // The first keys' values that fit one answer, and always the first's.
  size_t bytes = 0;
  for (const std::string& key : keys) {
    const std::string& value = values_[key];
    bytes += value.size();
    if (bytes > kMaxGetManyAnswerBytes && response->values_size() > 0) break;
    response->add_values(value);
  }
  return grpc::Status::OK;
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

grpc::Status RendezvousServer::Impl::Barrier(grpc::ServerContext* context,
                                             const pb::BarrierRequest* request,
                                             pb::BarrierResponse* response) {
  if (grpc::Status s = CheckBarrier(*request); !s.ok()) return s;
  const absl::Duration wait =
      std::clamp(absl::Milliseconds(request->timeout_ms()),
                 absl::ZeroDuration(), kMaxWait);
  absl::MutexLock lock(&mu_);
  BarrierState* barrier = nullptr;
  if (grpc::Status s =
          ArriveLocked(*request, wait > absl::ZeroDuration(), &barrier);
      !s.ok()) {
    return s;
  }
  auto complete = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return barrier->arrived() >= barrier->count;
  };
  if (barrier->arrived() >= barrier->count) {
    WakeLocked(BarrierTopic(request->name()));
  }
  absl::Status status = WaitLocked(context, wait, complete, [&] {
    return BarrierTopic(request->name());
  });
  response->set_arrived(barrier->arrived());
  if (status.ok()) return grpc::Status::OK;
  if (absl::IsDeadlineExceeded(status)) {
    context->AddTrailingMetadata(kBarrierArrivedKey,
                                 absl::StrCat(barrier->arrived()));
    return grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        absl::StrCat("barrier ", Quote(request->name()), ": ",
                     barrier->arrived(), " of ", barrier->count,
                     " arrived within ", absl::FormatDuration(wait)));
  }
  return ToGrpc(status);
}

}  // namespace hvd
