// The state a TcpContext shares with the Requests it hands out: the io
// thread, the pairs, and the first failure. Requests hold it by shared_ptr,
// so waiting on a request after its context is destroyed is safe (the
// request has then failed with Cancelled).
#ifndef HVD_CORE_TRANSPORT_TCP_CONTEXT_CORE_H_
#define HVD_CORE_TRANSPORT_TCP_CONTEXT_CORE_H_

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/transport/tcp/pair.h"
#include "core/transport/tcp/peer_connector.h"
#include "core/transport/tcp/tcp_options.h"

namespace hvd::transport::tcp_internal {

// Thread-safe after Start().
class Core final : public PairObserver, public PeerConnector::Sink {
 public:
  // `io` will hold the pairs' sockets; nobody runs it yet.
  Core(int rank, int size, std::unique_ptr<boost::asio::io_context> io,
       TcpTuning tuning);
  ~Core() override;  // Shutdown()
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  boost::asio::io_context& io() { return *io_; }
  // Before Start(): one pair per peer, not connected yet, and the connector
  // (built on io(), with this Core as its sink) that connects them as ops
  // are posted to them.
  void AddPair(std::unique_ptr<Pair> pair);
  void SetConnector(std::unique_ptr<PeerConnector> connector);
  // Starts accepting, and the io thread.
  void Start();
  // Stops the io thread, fails pending ops with Cancelled, closes the
  // sockets. Idempotent; no call into a Pair may run concurrently.
  void Shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const TcpTuning& tuning() const { return tuning_; }
  // The pair of `peer`; nullptr for this rank or an out-of-range peer.
  Pair* pair(int peer) const;

  // Records the first failure and fails every pair's pending and future ops.
  // Returns once they are failed, also to a caller that came second: after
  // Abort the caller may free what its requests pointed at.
  void Fail(absl::Status status);
  absl::Status status() const;
  // status() unless it is OK, which this answers without a lock: what a new
  // op fails with.
  absl::Status FailureIfAny() const {
    return failed_.load(std::memory_order_acquire) ? status()
                                                   : absl::OkStatus();
  }
  // Has the io thread watch every pair with unwatched receives.
  void WatchAll();

  void OnPairFailing(const absl::Status& status) override;
  void OnPairFailure(absl::Status status) override;
  void OnUnwatchedRecv() override;
  void OnFirstPost(int peer) override;
  void OnConnected(int peer, boost::asio::ip::tcp::socket socket) override;
  void OnConnectFailed(int peer, absl::Status status) override;

 private:
  const int rank_;
  const int size_;
  const TcpTuning tuning_;
  // Declared first: the pairs' sockets must go before their io_context.
  std::unique_ptr<boost::asio::io_context> io_;
  std::optional<
      boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      work_;
  std::unique_ptr<PeerConnector> connector_;  // set before Start
  std::vector<std::unique_ptr<Pair>> pairs_;  // by peer rank; fixed after Start
  std::thread io_thread_;
  std::atomic<bool> any_unwatched_{false};
  std::atomic<bool> failed_{false};  // status_ is not OK
  std::atomic<bool> shut_down_{false};

  // Held through Fail, pairs included (never while a pair's lock is held).
  absl::Mutex fail_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // Every pair has been failed with status_ (status_ may be recorded
  // first, by OnPairFailing).
  bool pairs_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_CONTEXT_CORE_H_
