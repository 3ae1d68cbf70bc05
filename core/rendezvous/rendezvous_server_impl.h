// The rendezvous server's implementation, shared by its source files:
// rendezvous_server.cc (lifecycle, registration), rendezvous_call.cc (a call:
// admission, parsing, answering, waiting) and rendezvous_store.cc (the
// key-value store and barriers, with their bounds).
// Internal to //core/rendezvous:rendezvous_server.
#ifndef HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_IMPL_H_
#define HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_IMPL_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
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

// The longest one call waits, whatever the client asks.
inline constexpr absl::Duration kMaxWait = absl::Seconds(60);

grpc::Status ToGrpc(const absl::Status& status);
grpc::Status Refused(grpc::StatusCode code, absl::string_view what);
// A key or name for an error message: escaped, and cut after 64 bytes so
// that an oversized key does not make an oversized message.
std::string Quote(absl::string_view bytes);

}  // namespace rendezvous_internal

// The server's own service. It is served through gRPC's callback generic
// service: a call is admitted (the job token) before its request is read,
// then parsed and answered by its method; a call that has to wait holds no
// thread, only its place among the waiting calls, until a change answers it
// (a Set of its key, an arrival at its barrier), its deadline passes (a
// timer thread), the client cancels, or the server shuts down.
class RendezvousServer::Impl final : public grpc::CallbackGenericService {
 public:
  explicit Impl(RendezvousServerOptions options);
  ~Impl() override;

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

  // A call to this server's own service (rendezvous_call.cc).
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  class Call;
  // Parses a call's request and answers it (ParseAndRun).
  using Method = void (*)(Impl& impl, Call& call, grpc::ByteBuffer& request);
  // Calls answered under mu_, to be delivered once it is released.
  using Answers = std::vector<std::pair<Call*, grpc::Status>>;

  // How a call waits (WaitLocked).
  struct Wait {
    absl::Duration wait;  // at most this long (zero: answer at once)
    // Whether the call can be answered now; fills in its response when so.
    std::function<bool()> ready;
    // While not ready: the one change that could make it ready (KeyTopic,
    // BarrierTopic), so that a Set does not look at thousands of calls
    // waiting on other keys.
    std::function<std::string()> topic;
    // The answer when `wait` passes first.
    std::function<grpc::Status()> expired;
  };

  // The method a call's path names (/hvd.rendezvous.Rendezvous/Get, ...);
  // nullptr for none.
  static Method MethodOf(absl::string_view path);
  // Parses `bytes` as a Request and runs `kMethod` on it, answering with a
  // Response; INVALID_ARGUMENT when the bytes are not a Request.
  template <typename Request, typename Response,
            void (Impl::*kMethod)(Call&, const Request&)>
  static void ParseAndRun(Impl& impl, Call& call, grpc::ByteBuffer& bytes);

  // The methods: each answers `call` (at once or, through WaitLocked,
  // later) from its parsed request.
  void Register(Call& call, const rendezvous_internal::pb::RegisterRequest&
                                request) ABSL_LOCKS_EXCLUDED(mu_);
  void Set(Call& call, const rendezvous_internal::pb::SetRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Get(Call& call, const rendezvous_internal::pb::GetRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  void GetMany(Call& call,
               const rendezvous_internal::pb::GetManyRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Barrier(Call& call,
               const rendezvous_internal::pb::BarrierRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

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

  // How long a call asking for `timeout_ms` waits: at most kMaxWait, and
  // not at all for a timeout <= 0.
  static absl::Duration WaitOf(int64_t timeout_ms) {
    return std::clamp(absl::Milliseconds(timeout_ms), absl::ZeroDuration(),
                      rendezvous_internal::kMaxWait);
  }
  // What a call the server cannot answer any more is told.
  static grpc::Status ShuttingDown() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "rendezvous server is shutting down");
  }
  // Answers `call` now or files it (WaitLocked), taking the lock.
  void AnswerOrWait(Call& call, Wait wait) ABSL_LOCKS_EXCLUDED(mu_);
  // The answer to `call` if it can be given now: `wait.ready()` holds, the
  // wait is zero (wait.expired()), the server is shutting down
  // (UNAVAILABLE), the client has cancelled (CANCELLED), or the call may not
  // wait (RESOURCE_EXHAUSTED, the bound on waiting calls). Otherwise files
  // the call to be answered later, by WakeLocked, the timer, the client's
  // cancellation or Shutdown, and returns nullopt. A client deadline sooner
  // than `wait.wait` bounds the wait.
  std::optional<grpc::Status> WaitLocked(Call& call, Wait wait)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the calls waiting on `topic` that are now ready to `answers`, and
  // files the others under their next topic.
  void WakeLocked(const std::string& topic, Answers& answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `call` out of the waiting calls; false when it was not waiting.
  bool UnfileLocked(Call& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers calls; without mu_ (an answer may run gRPC's reactions).
  static void Deliver(const Answers& answers) ABSL_LOCKS_EXCLUDED(mu_);
  // The timer thread: answers waiting calls whose deadline has passed.
  void ExpireWaits() ABSL_LOCKS_EXCLUDED(mu_);
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
  const std::shared_ptr<const rendezvous_internal::TokenCheck> check_;

  // Serializes Start and Shutdown; never held while handling a call.
  mutable absl::Mutex lifecycle_mu_;
  std::unique_ptr<rendezvous_internal::TokenGuard> guard_
      ABSL_GUARDED_BY(lifecycle_mu_);
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(lifecycle_mu_);
  std::thread timer_ ABSL_GUARDED_BY(lifecycle_mu_);
  bool started_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  int port_ ABSL_GUARDED_BY(lifecycle_mu_) = 0;

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool timer_stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar timer_wake_;  // an earlier deadline, or timer_stop_
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  // The waiting calls by topic and by deadline.
  std::multimap<std::string, Call*> waiters_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, Call*> deadlines_ ABSL_GUARDED_BY(mu_);
  // Bytes of keys and values, barrier names and participants held.
  size_t store_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, BarrierState> barriers_ ABSL_GUARDED_BY(mu_);
  std::map<int, WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
  // The ranks each process (hostname, pid) registered, for retries.
  std::map<std::pair<std::string, int64_t>, std::set<int>> ranks_of_process_
      ABSL_GUARDED_BY(mu_);
  int lowest_free_rank_ ABSL_GUARDED_BY(mu_) = 0;
};

// One call to the server's own service, admitted (it carried the token):
// reads the request, runs its method, and answers once. Owned by gRPC from
// its creation to OnDone.
class RendezvousServer::Impl::Call final
    : public grpc::ServerGenericBidiReactor {
 public:
  Call(Impl* impl, grpc::CallbackServerContext* context, Method method)
      : impl_(impl), context_(context), method_(method) {
    Order();
    StartRead(&request_);
  }

  grpc::CallbackServerContext& context() { return *context_; }
  // The response the answer carries when it is OK: a Response, made by
  // ParseAndRun before the method runs.
  template <typename Response>
  Response& response() {
    return static_cast<Response&>(*response_);
  }
  void set_response(std::unique_ptr<google::protobuf::Message> response) {
    response_ = std::move(response);
  }
  // Sends the response (when `status` is OK) and `status`. Once, without
  // the server's lock.
  void Answer(const grpc::Status& status);

  // While the call waits (WaitLocked). Guarded by the server's mu_ (not
  // annotated: the analysis cannot tell this call's server from the one
  // whose functions use them).
  Wait wait;
  bool waiting = false;
  std::multimap<std::string, Call*>::iterator by_topic;
  std::multimap<absl::Time, Call*>::iterator by_deadline;

 private:
  void OnReadDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  // gRPC orders a call's reactions and answer through synchronization of
  // its own, which ThreadSanitizer does not see (Debian's gRPC is not
  // instrumented); each passes through this counter, so that it sees the
  // order too.
  void Order() { order_.fetch_add(1, std::memory_order_acq_rel); }

  Impl* const impl_;
  grpc::CallbackServerContext* const context_;
  const Method method_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
  std::unique_ptr<google::protobuf::Message> response_;
  std::atomic<int> order_{0};
};

}  // namespace hvd

#endif  // HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_IMPL_H_
