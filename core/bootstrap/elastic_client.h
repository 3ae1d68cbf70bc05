// The worker's side of an elastic job (proto/elastic.proto): joining a round
// at init, and hearing the round's events until shutdown. Both talk to the
// Elastic service hvdrun serves beside the rendezvous (Config's
// rendezvous_addr, job token and TLS).
#ifndef HVD_CORE_BOOTSTRAP_ELASTIC_CLIENT_H_
#define HVD_CORE_BOOTSTRAP_ELASTIC_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/runtime/config.h"

namespace hvd::bootstrap {

// This worker's place in one round.
struct RoundAssignment {
  int round = -1;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

struct ElasticClientOptions {
  // How long one Join asks the server to wait for the round (the server
  // caps it at 30 s). A PENDING answer after such a wait is asked again at
  // once.
  absl::Duration join_wait_per_rpc = absl::Seconds(10);
  // The network's allowance on top of that wait, per Join.
  absl::Duration rpc_grace = absl::Seconds(5);
  // Pause before asking again when the server was unreachable, or answered
  // PENDING in less than half the wait (a server that is shutting down).
  absl::Duration retry_pause = absl::Milliseconds(250);
};

// Joins the first round formed after `last_round` (-1: none yet). Waits as
// long as the launcher takes to form it (it may be waiting for hosts), but
// gives up once the server has been unreachable for config.start_timeout:
// Unavailable naming the address. CANCELLED "removed from the elastic job:
// <reason>" when the worker is no longer in the job (the process should exit
// 0). UNAUTHENTICATED for a wrong job token, UNIMPLEMENTED when the server
// has no Elastic service; other errors keep gRPC's code. Every message names
// the rendezvous address.
absl::StatusOr<RoundAssignment> JoinRound(
    const runtime::Config& config, int last_round,
    const ElasticClientOptions& options = {});

// What a RoundWatcher reports. Both run on the watcher's thread and must not
// call Stop() or destroy the watcher.
struct RoundEvents {
  // The round is over: at most once per watcher. `reason` names what ended
  // it; "lost the launcher: ..." when the Watch stream broke.
  std::function<void(const std::string& reason)> on_abort;
  // Hosts were added or removed (seq increases with each update).
  std::function<void(int64_t seq, bool added, bool removed)> on_hosts_updated;
};

// Watches one round on a thread of its own, from Start until Stop. Stop (or
// the destructor) cancels the call and joins the thread; no callback runs
// after it returns. Start and Stop are thread-safe.
class RoundWatcher {
 public:
  // InvalidArgument for an address or token that cannot be used; otherwise
  // the watch starts even if the server is not reachable (that is reported
  // through on_abort).
  static absl::StatusOr<std::unique_ptr<RoundWatcher>> Start(
      const runtime::Config& config, int round, RoundEvents events);
  ~RoundWatcher();
  RoundWatcher(const RoundWatcher&) = delete;
  RoundWatcher& operator=(const RoundWatcher&) = delete;

  void Stop();

 private:
  class Call;
  RoundWatcher(std::unique_ptr<Call> call, RoundEvents events);
  void Run();

  const std::unique_ptr<Call> call_;
  const RoundEvents events_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hvd::bootstrap

#endif  // HVD_CORE_BOOTSTRAP_ELASTIC_CLIENT_H_
