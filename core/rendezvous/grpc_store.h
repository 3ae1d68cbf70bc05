// The Store of a real job: a client of the rendezvous server
// (proto/rendezvous.proto, served by core/rendezvous/rendezvous_server.h).
//
// Every call is bounded: unary RPCs by GrpcStoreOptions::rpc_timeout, Get and
// Barrier by the caller's timeout (they wait in server-side slices of at most
// max_wait_per_rpc, so a wait of any length survives per-RPC limits and never
// pins a server thread for long). Errors keep the gRPC status code and name
// the rendezvous address: "rendezvous 10.0.0.1:29500: Set 'k': ...".
// UNAUTHENTICATED means the job token is missing or wrong.
//
// Thread-safe.
#ifndef HVD_CORE_RENDEZVOUS_GRPC_STORE_H_
#define HVD_CORE_RENDEZVOUS_GRPC_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/rendezvous/store.h"
#include "core/rendezvous/tls.h"

namespace hvd {

struct GrpcStoreOptions {
  // Deadline of each unary RPC (Register, Set), and the allowance for the
  // network on top of the server-side wait of a Get or Barrier slice (capped
  // at 5 s there).
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Longest server-side wait one Get or Barrier RPC asks for; longer waits
  // take several RPCs. The server caps it at 60 s.
  absl::Duration max_wait_per_rpc = absl::Seconds(10);
  // TLS: the CA the server's certificate must chain to; plaintext when
  // tls.ca_pem is empty.
  rendezvous::ClientTls tls;
};

// What Register returns.
struct Registration {
  int rank = -1;  // as requested, or assigned when -1 was requested
  int size = 0;   // the job size; 0 when the server does not know it
};

class GrpcStore : public Store {
 public:
  // Opens a channel to `address` ("host:port") and waits until it is ready,
  // at most `timeout`: Unavailable naming the address otherwise.
  // InvalidArgument for an empty address or a token gRPC metadata cannot
  // carry (proto/job_token.h). The token is only checked by the first RPC.
  static absl::StatusOr<std::unique_ptr<GrpcStore>> Connect(
      std::string address, std::string token, absl::Duration timeout,
      GrpcStoreOptions options = {});

  ~GrpcStore() override;
  GrpcStore(const GrpcStore&) = delete;
  GrpcStore& operator=(const GrpcStore&) = delete;

  // Announces this process; rank -1 asks the server for one. Idempotent.
  // `init_count`: which hvd_init of this process it is (from 1; 0: not
  // said). A server rank 0 runs for another of its inits refuses it
  // (ABORTED), cancels it while shutting down (CANCELLED), and while rank 0
  // replaces that server with the next on the same port none answers
  // (UNAVAILABLE): each is tried again until `timeout` has passed, and the
  // last refusal is returned then. Zero `timeout`: one try.
  absl::StatusOr<Registration> Register(
      int rank, absl::string_view hostname, int64_t pid,
      const std::vector<std::string>& addresses, int init_count = 0,
      absl::Duration timeout = absl::ZeroDuration());

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override;
  // One GetMany RPC for up to 4096 keys whose values fit one answer; more
  // calls only for longer lists or larger values.
  absl::StatusOr<std::vector<std::string>> GetMany(
      const std::vector<std::string>& keys, absl::Duration timeout) override;
  // Each call is one participant (retried slices are not counted twice).
  // Barrier names are single-use.
  absl::Status Barrier(absl::string_view name, int count,
                       absl::Duration timeout) override;

  const std::string& address() const { return address_; }

 private:
  class Rpc;
  GrpcStore(std::string address, std::string token, GrpcStoreOptions options,
            std::unique_ptr<Rpc> rpc);

  const std::string address_;
  const std::string token_;
  const GrpcStoreOptions options_;
  const std::unique_ptr<Rpc> rpc_;
  const std::string instance_id_;  // random; prefixes barrier participant ids
  std::atomic<uint64_t> next_participant_{0};
};

}  // namespace hvd

#endif  // HVD_CORE_RENDEZVOUS_GRPC_STORE_H_
