// The rendezvous server's implementation, shared by its two source files:
// rendezvous_server.cc (lifecycle, registration, waiting) and
// rendezvous_store.cc (the key-value store and barriers, with their bounds).
// Internal to //core/rendezvous:rendezvous_server.
#ifndef HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_IMPL_H_
#define HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_IMPL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/rendezvous/rendezvous_auth.h"
#include "core/rendezvous/rendezvous_server.h"
#include "proto/rendezvous.grpc.pb.h"
#include "proto/rendezvous_bounds.h"

namespace hvd {
namespace rendezvous_internal {

namespace pb = ::hvd::rendezvous;

// One blocking call holds a gRPC thread; bound it whatever the client asks.
inline constexpr absl::Duration kMaxWait = absl::Seconds(60);

grpc::Status ToGrpc(const absl::Status& status);
grpc::Status Refused(grpc::StatusCode code, absl::string_view what);
// A key or name for an error message: escaped, and cut after 64 bytes so
// that an oversized key does not make an oversized message.
std::string Quote(absl::string_view bytes);

}  // namespace rendezvous_internal

class RendezvousServer::Impl final
    : public rendezvous_internal::pb::Rendezvous::Service {
 public:
  explicit Impl(RendezvousServerOptions options)
      : options_(std::move(options)),
        max_blocked_calls_(options_.limits.max_blocked_calls > 0
                               ? options_.limits.max_blocked_calls
                           : options_.size > 0 ? 64 + 2 * options_.size
                                               : 256) {}

  absl::Status Start() ABSL_LOCKS_EXCLUDED(lifecycle_mu_);
  void Shutdown() ABSL_LOCKS_EXCLUDED(lifecycle_mu_, mu_);
  int port() const ABSL_LOCKS_EXCLUDED(lifecycle_mu_);
  std::vector<WorkerInfo> Workers() const ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<std::string> Value(absl::string_view key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<int> WaitForRanks(int size, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);
  int BlockedCalls() const ABSL_LOCKS_EXCLUDED(mu_);
  bool WaitForBlockedCalls(int count, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status Register(
      grpc::ServerContext* context,
      const rendezvous_internal::pb::RegisterRequest* request,
      rendezvous_internal::pb::RegisterResponse* response) override;
  grpc::Status Set(grpc::ServerContext* context,
                   const rendezvous_internal::pb::SetRequest* request,
                   rendezvous_internal::pb::SetResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context,
                   const rendezvous_internal::pb::GetRequest* request,
                   rendezvous_internal::pb::GetResponse* response) override;
  grpc::Status GetMany(grpc::ServerContext* context,
                       const rendezvous_internal::pb::GetManyRequest* request,
                       rendezvous_internal::pb::GetManyResponse* response)
      override;
  grpc::Status Barrier(
      grpc::ServerContext* context,
      const rendezvous_internal::pb::BarrierRequest* request,
      rendezvous_internal::pb::BarrierResponse* response) override;

 private:
  struct BarrierState {
    int count = 0;
    int anonymous = 0;  // arrivals without a participant id
    std::set<std::string> participants;
    int arrived() const {
      return anonymous + static_cast<int>(participants.size());
    }
  };

  // Returns true for a new registration, false for an idempotent repeat;
  // fills in the assigned rank.
  absl::StatusOr<bool> RegisterLocked(WorkerInfo* info)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Waits until done() holds (OK), `wait` passes (DeadlineExceeded), the
  // server shuts down (Unavailable) or the client cancels (Cancelled).
  // While done() does not hold, topic() names the one change that could
  // make it hold next (KeyTopic, BarrierTopic): only that change wakes the
  // call, so a Set does not wake thousands of calls waiting on other keys.
  absl::Status WaitLocked(grpc::ServerContext* context, absl::Duration wait,
                          const std::function<bool()>& done,
                          const std::function<std::string()>& topic)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the calls waiting on `topic`.
  void WakeLocked(const std::string& topic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::string KeyTopic(absl::string_view key) {
    return absl::StrCat("k", key);
  }
  static std::string BarrierTopic(absl::string_view name) {
    return absl::StrCat("b", name);
  }

  // OK, or INVALID_ARGUMENT when `name` (a key, barrier or participant) is
  // longer than the limit.
  grpc::Status CheckName(absl::string_view what, absl::string_view name) const;
  // OK, or RESOURCE_EXHAUSTED when no further call may wait.
  grpc::Status CheckCanBlock() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What can be checked of a barrier call without the lock.
  grpc::Status CheckBarrier(
      const rendezvous_internal::pb::BarrierRequest& request) const;
  // Counts the caller in (creating the barrier on first arrival) unless a
  // bound or the barrier's count refuses it; `will_wait`: the call would
  // block if the barrier is not complete with it.
  grpc::Status ArriveLocked(
      const rendezvous_internal::pb::BarrierRequest& request, bool will_wait,
      BarrierState** arrived) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RendezvousServerOptions options_;
  const int max_blocked_calls_;

  // Serializes Start and Shutdown; never held while handling a call.
  mutable absl::Mutex lifecycle_mu_;
  std::unique_ptr<rendezvous_internal::TokenGuard> guard_
      ABSL_GUARDED_BY(lifecycle_mu_);
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(lifecycle_mu_);
  bool started_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  int port_ ABSL_GUARDED_BY(lifecycle_mu_) = 0;

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  // The blocked calls by topic, each with its own condition variable.
  std::multimap<std::string, absl::CondVar*> waiters_ ABSL_GUARDED_BY(mu_);
  // Bytes of keys and values, barrier names and participants held.
  size_t store_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, BarrierState> barriers_ ABSL_GUARDED_BY(mu_);
  std::map<int, WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
  // The ranks each process (hostname, pid) registered, for retries.
  std::map<std::pair<std::string, int64_t>, std::set<int>> ranks_of_process_
      ABSL_GUARDED_BY(mu_);
  int lowest_free_rank_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hvd

#endif  // HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_IMPL_H_
