#include "core/transport/tcp/context_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/thread_role.h"
#include "core/transport/tcp/socket_options.h"

namespace hvd::transport::tcp_internal {
Core::Core(int rank, int size, std::unique_ptr<boost::asio::io_context> io,
           TcpTuning tuning)
    : rank_(rank), size_(size), tuning_(tuning), io_(std::move(io)) {
  pairs_.resize(size);
}

Core::~Core() { Shutdown(); }

void Core::AddPair(std::unique_ptr<Pair> pair) {
  const int peer = pair->peer();
  pairs_[peer] = std::move(pair);
}

void Core::SetConnector(std::unique_ptr<PeerConnector> connector) {
  connector_ = std::move(connector);
}

void Core::Start() {
  if (connector_ != nullptr) connector_->Start();
  io_->restart();
  work_.emplace(io_->get_executor());
  io_thread_ = std::thread([this] {
    NameThisThread("hvd-tcp-io");
    io_->run();
  });
}

void Core::Shutdown() {
  if (shut_down_.exchange(true)) return;
  work_.reset();
  io_->stop();
  if (io_thread_.joinable()) io_thread_.join();
  if (connector_ != nullptr) connector_->Close();
  {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) {
      status_ = absl::CancelledError(
          absl::StrCat("rank ", rank_, ": TCP transport context destroyed"));
    }
    failed_.store(true, std::memory_order_release);
  }
  for (auto& pair : pairs_) {
    if (pair == nullptr) continue;
    pair->Close(absl::CancelledError(
        absl::StrCat("rank ", rank_,
                     ": TCP transport context destroyed while a request "
                     "to or from rank ",
                     pair->peer(), " was pending")));
  }
}

Pair* Core::pair(int peer) const {
  if (peer < 0 || peer >= size_) return nullptr;
  return pairs_[peer].get();
}

void Core::Fail(absl::Status status) {
  absl::MutexLock failing(&fail_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (pairs_failed_) return;
    pairs_failed_ = true;
    if (status_.ok()) status_ = status;
    failed_.store(true, std::memory_order_release);
    status = status_;  // the first failure recorded
  }
  for (auto& pair : pairs_) {
    if (pair != nullptr) pair->Fail(status);
  }
}

void Core::OnPairFailing(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (status_.ok()) status_ = status;
  failed_.store(true, std::memory_order_release);
}

absl::Status Core::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void Core::OnPairFailure(absl::Status status) {
  bool first;
  {
    absl::MutexLock lock(&mu_);
    first = !pairs_failed_ && status_ == status;
  }
  if (first) HVD_LOG(WARNING) << status.message();
  Fail(std::move(status));
}

void Core::OnUnwatchedRecv() { any_unwatched_.store(true); }

void Core::OnFirstPost(int peer) {
  if (connector_ != nullptr) connector_->Dial(peer);
}

void Core::OnConnected(int peer, boost::asio::ip::tcp::socket socket) {
  Pair* p = pair(peer);
  if (p == nullptr) return;
  SetNoDelay(socket);
  p->Attach(std::move(socket));
}

void Core::OnConnectFailed(int /*peer*/, absl::Status status) {
  OnPairFailure(std::move(status));
}

void Core::WatchAll() {
  if (!any_unwatched_.load(std::memory_order_relaxed)) return;
  if (!any_unwatched_.exchange(false)) return;
  for (auto& pair : pairs_) {
    if (pair != nullptr && pair->TakeNeedsWatch()) pair->Watch();
  }
}

}  // namespace hvd::transport::tcp_internal
