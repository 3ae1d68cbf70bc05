// The rendezvous server: the gRPC service (proto/rendezvous.proto) where the
// processes of one job register and exchange bootstrap data through a
// key-value store with blocking Get and barriers. hvdrun runs one per job; an
// orchestrator can run it standalone.
//
// Every RPC, on the Rendezvous service and on any extra service hosted here,
// must carry the job token (proto/job_token.h); a missing or wrong one gets
// UNAUTHENTICATED "missing or wrong job token" before any handler runs, and a
// WARNING log line naming the peer's address (never the token).
//
// Rejected calls are logged once in full, then summed up at most once per
// `rejection_log_interval`, so that a flood of them cannot flood the log.
//
// What a caller with the token can make the server hold is bounded
// (RendezvousLimits): a call past a bound fails with RESOURCE_EXHAUSTED or
// INVALID_ARGUMENT naming the bound and its value, and changes nothing.
//
// Threading: every method is thread-safe. The Rendezvous service runs on
// gRPC's callback API: a blocking Get, GetMany or Barrier holds no thread
// while it waits, for at most min(its timeout, 60 s), and is answered by the
// change it waits for, by a timer thread at its deadline, at once when its
// client cancels, or with UNAVAILABLE when the server shuts down. Extra
// services use gRPC's synchronous API: a long call to one holds a thread,
// and threads it frees stay idle (up to the bound on blocked calls) for
// gRPC's poll timeout of 10 s, so that a start-up wave of such calls does
// not create a thread for each.
#ifndef HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_H_
#define HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/rendezvous/tls.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace hvd {

// One registered worker, as the server saw it.
struct WorkerInfo {
  int rank = -1;
  std::string hostname;
  int64_t pid = 0;
  std::vector<std::string> addresses;  // as the worker announced them
  std::string peer;                    // gRPC peer, e.g. "ipv4:10.0.0.7:51234"
};

// Bounds on the store and on waiting calls. The defaults leave room for the
// bootstrap of jobs of many thousands of ranks (keys are short names, values
// addresses and ids of at most kilobytes).
struct RendezvousLimits {
  size_t max_key_bytes = 4096;  // of a key or a barrier name
  // Keys plus values of everything stored (a replaced value counts once).
  size_t max_store_bytes = size_t{128} << 20;
  // Get, GetMany and Barrier calls waiting at once; 0: 64 + 2 x the job
  // size, or 256 when the size is unknown.
  int max_blocked_calls = 0;
};

struct RendezvousServerOptions {
  std::string address = "0.0.0.0:0";  // host:port to listen on; port 0 = ephemeral
  std::string token;                   // job token every RPC must carry (required)
  rendezvous::ServerTls tls;           // empty: plaintext
  // Further services on the same server and port, e.g. the launcher's agent
  // service. Not owned; each must outlive the server, be registered with no
  // other server meanwhile, and implement its methods with gRPC's synchronous
  // API (the token check wraps synchronous handlers; Start refuses others).
  std::vector<grpc::Service*> extra_services;
  // Job size told to registering workers, and the bound on ranks; 0: unknown
  // (ranks unbounded, workers are told 0).
  int size = 0;
  // The hvd_init of its process a rank 0 serving the rendezvous itself is
  // in (counted from 1): a worker registering for another of its inits is
  // refused with ABORTED naming both, as it may be early (rank 0 still
  // shutting the last one down) or late. 0: any init registers.
  int init_count = 0;
  RendezvousLimits limits;
  // At most one log line per interval sums up the calls rejected for a
  // missing or wrong token (the first is logged at once).
  absl::Duration rejection_log_interval = absl::Seconds(10);
  // A connection with no call in flight is closed after this long, so that
  // one opened and left idle (or that only sent the HTTP/2 preface) does
  // not hold the server's resources; clients reconnect on their next call.
  absl::Duration idle_connection_timeout = absl::Minutes(1);
  // Called after each new registration (not for an idempotent repeat), on a
  // gRPC thread with no lock held. Must not call Shutdown.
  std::function<void(const WorkerInfo&)> on_register;
};

class RendezvousServer {
 public:
  explicit RendezvousServer(RendezvousServerOptions options);
  // Shuts down if still running.
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // Validates the options, binds and starts serving. InvalidArgument for a
  // bad token or an extra service using the async/callback API;
  // Unavailable naming the address when it cannot be bound;
  // FailedPrecondition when called twice.
  absl::Status Start();

  // The bound port (the ephemeral one for port 0); 0 before Start.
  int port() const;

  // Registered workers, ordered by rank.
  std::vector<WorkerInfo> Workers() const;

  // The value stored under `key`, read in process (hvdrun's metrics page);
  // nullopt when unset.
  std::optional<std::string> Value(absl::string_view key) const;

  // Waits until ranks 0..size-1 have all registered, `timeout` passes, or the
  // server shuts down. Returns the ranks still missing (empty: all there).
  std::vector<int> WaitForRanks(int size, absl::Duration timeout) const;

  // Get, GetMany and Barrier calls waiting right now (for observability and
  // tests).
  int BlockedCalls() const;
  // Waits until exactly `count` Get, GetMany and Barrier calls wait, or
  // `timeout` passes; returns whether they were.
  bool WaitForBlockedCalls(int count, absl::Duration timeout) const;

  // Stops serving: blocked calls fail with UNAVAILABLE, in-flight calls get
  // a short grace period, then the port is closed. Idempotent; thread-safe.
  void Shutdown();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvd

#endif  // HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_H_
