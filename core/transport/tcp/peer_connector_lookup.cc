// PeerConnector's lookups: a peer's endpoints are looked up on a thread of
// the connector's own, as this rank first dials the peer.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/transport/tcp/peer_connector.h"

namespace hvd::transport::tcp_internal {

namespace asio = boost::asio;

void PeerConnector::LookUp(int peer) {
  if (looking_up_[peer]) return;
  looking_up_[peer] = true;
  absl::MutexLock lock(&lookup_mu_);
  lookup_queue_.push_back(peer);
  lookup_wake_.Signal();
  if (!lookup_thread_.joinable() && !lookup_stop_) {
    lookup_thread_ = std::thread([this] { LookUpLoop(); });
  }
}

void PeerConnector::LookUpLoop() {
  while (true) {
    int peer;
    {
      absl::MutexLock lock(&lookup_mu_);
      while (!lookup_stop_ && lookup_queue_.empty()) {
        lookup_wake_.Wait(&lookup_mu_);
      }
      if (lookup_stop_) return;
      peer = lookup_queue_.front();
      lookup_queue_.pop_front();
    }
    const absl::Time deadline = absl::Now() + config_.connect_timeout;
    absl::StatusOr<std::vector<Endpoint>> found;
    while (true) {
      found = lookup_(peer, std::min(kLookupSlice, deadline - absl::Now()));
      if (!absl::IsDeadlineExceeded(found.status()) ||
          absl::Now() >= deadline) {
        break;
      }
      absl::MutexLock lock(&lookup_mu_);
      if (lookup_stop_) return;
    }
    if (absl::IsDeadlineExceeded(found.status())) {
      found = absl::DeadlineExceededError(absl::StrCat(
          "rank ", config_.rank, ": rank ", peer,
          " published no address to connect to within ",
          absl::FormatDuration(config_.connect_timeout),
          " (has its process started?)"));
    } else if (!found.ok()) {
      found = absl::Status(
          found.status().code(),
          absl::StrCat("rank ", config_.rank, ": looking up rank ", peer,
                       "'s address: ", found.status().message()));
    }
    asio::post(io_, [this, peer, found = std::move(found)]() mutable {
      OnLookedUp(peer, std::move(found));
    });
  }
}

void PeerConnector::OnLookedUp(
    int peer, absl::StatusOr<std::vector<Endpoint>> candidates) {
  if (closed_) return;
  if (!candidates.ok()) {
    sink_->OnConnectFailed(peer, candidates.status());
    return;
  }
  candidates_[peer] = *std::move(candidates);
  looked_up_[peer] = true;
  StartDial(peer);
}

}  // namespace hvd::transport::tcp_internal
