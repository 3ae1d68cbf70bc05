// The job-token check of the rendezvous server, applied to every method of
// every service the server hosts (its own and the launcher's extra services).
//
// Why not gRPC's own hooks (gRPC 1.51, verified here):
//  - grpc::AuthMetadataProcessor cannot be set on InsecureServerCredentials
//    (it asserts), and it is never told the peer's address, which the
//    rejection log must name.
//  - A server interceptor sees the peer but cannot fail a call: the handler
//    runs anyway.
// The server's own service is a callback generic service (no thread per
// waiting call) that runs the check when a call arrives, before it reads the
// request. The extra services use the synchronous API, and TokenGuard
// replaces each of their methods' handlers with one that checks the token
// first and either runs the original or answers UNAUTHENTICATED without
// running it. The replacement is registered as a streaming-request method,
// so that gRPC reads no request body before the check. Either way a rejected
// call costs its metadata, not the message (up to gRPC's 4 MB) it may carry.
// TokenGuard relies on gRPC's codegen interfaces
// (grpc::internal::MethodHandler) and on reaching grpc::Service's private
// method table; both are pinned by Debian's gRPC 1.51 and covered by
// rendezvous_auth_test, which fails loudly if a gRPC upgrade changes them.
// Side effect: a server interceptor on such a server would see every
// guarded method as streaming (the server installs none).
//
// Internal to //core/rendezvous:rendezvous_server.
#ifndef HVD_CORE_RENDEZVOUS_RENDEZVOUS_AUTH_H_
#define HVD_CORE_RENDEZVOUS_RENDEZVOUS_AUTH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace grpc {
class Service;
class ServerContextBase;
}  // namespace grpc

namespace hvd {
namespace rendezvous_internal {

class RejectionLog;

// Whether a call carries the job token: the check every method of the server
// runs before it reads the call's request. Rejections are logged as WARNINGs
// naming the method and the peer (never the token): the first at once, later
// ones summed up in at most one line per `log_interval`, and those not yet
// reported when the check goes. Thread-safe.
class TokenCheck {
 public:
  TokenCheck(std::string token, absl::Duration log_interval);
  ~TokenCheck();
  TokenCheck(const TokenCheck&) = delete;
  TokenCheck& operator=(const TokenCheck&) = delete;

  // True when `context` carries the token exactly once; otherwise logs the
  // rejection of `method` and returns false.
  bool Admits(const grpc::ServerContextBase& context,
              absl::string_view method) const;

 private:
  const std::string token_;
  std::unique_ptr<RejectionLog> log_;
};

// What a refused call is told.
inline constexpr char kTokenRejection[] = "missing or wrong job token";

// Guards services that use gRPC's synchronous API with `check` for as long as
// it lives; restores their original handlers when destroyed. Guard services
// before registering them with a grpc::Server and destroy this only after
// that server is destroyed. Not thread-safe (used during server start and
// teardown only); the wrapped handlers are.
class TokenGuard {
 public:
  explicit TokenGuard(std::shared_ptr<const TokenCheck> check);
  ~TokenGuard();
  TokenGuard(const TokenGuard&) = delete;
  TokenGuard& operator=(const TokenGuard&) = delete;

  // Wraps every method of `service` (not owned; must outlive this guard).
  // InvalidArgument naming the method when one uses the async or callback
  // API: those have no synchronous handler to wrap, and leaving them
  // unguarded would be a hole. Nothing is changed on error.
  absl::Status Guard(grpc::Service* service);

 private:
  struct Guarded;
  std::shared_ptr<const TokenCheck> check_;
  std::vector<Guarded> guarded_;
};

}  // namespace rendezvous_internal
}  // namespace hvd

#endif  // HVD_CORE_RENDEZVOUS_RENDEZVOUS_AUTH_H_
