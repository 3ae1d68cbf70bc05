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
    std::vector<int> batch;
    {
      absl::MutexLock lock(&lookup_mu_);
      while (!lookup_stop_ && lookup_queue_.empty()) {
        lookup_wake_.Wait(&lookup_mu_);
      }
      if (lookup_stop_) return;
      batch.assign(lookup_queue_.begin(), lookup_queue_.end());
      lookup_queue_.clear();
    }
    if (!LookUpBatch(std::move(batch))) return;
  }
}

bool PeerConnector::LookUpBatch(std::vector<int> batch) {
  const absl::Time deadline = absl::Now() + config_.connect_timeout;
  while (!batch.empty()) {
    absl::StatusOr<std::vector<std::vector<Endpoint>>> found =
        lookup_(batch, std::min(kLookupSlice, deadline - absl::Now()));
    if (found.ok() && found->size() != batch.size()) {
      found = absl::InternalError(absl::StrCat(
          "the lookup answered ", found->size(), " of ", batch.size(),
          " peers"));
    }
    if (found.ok()) {
      for (size_t i = 0; i < batch.size(); ++i) {
        PostLookedUp(batch[i], std::move((*found)[i]));
      }
      return true;
    }
    if (!absl::IsDeadlineExceeded(found.status())) {
      for (int peer : batch) PostLookedUp(peer, found.status());
      return true;
    }
    if (batch.size() > 1) {
      // Some have not published yet: hand over those that have.
      std::vector<int> missing;
      for (int peer : batch) {
        auto one = lookup_({peer}, absl::ZeroDuration());
        if (absl::IsDeadlineExceeded(one.status())) {
          missing.push_back(peer);
        } else if (one.ok()) {
          PostLookedUp(peer, std::move(one->front()));
        } else {
          PostLookedUp(peer, one.status());
        }
      }
      batch = std::move(missing);
    }
    if (absl::Now() >= deadline) {
      for (int peer : batch) {
        PostLookedUp(peer, absl::DeadlineExceededError(absl::StrCat(
                               "rank ", config_.rank, ": rank ", peer,
                               " published no address to connect to within ",
                               absl::FormatDuration(config_.connect_timeout),
                               " (has its process started?)")));
      }
      return true;
    }
    absl::MutexLock lock(&lookup_mu_);
    if (lookup_stop_) return false;
  }
  return true;
}

void PeerConnector::PostLookedUp(int peer,
                                 absl::StatusOr<std::vector<Endpoint>> found) {
  if (!found.ok() && !absl::IsDeadlineExceeded(found.status())) {
    found = absl::Status(
        found.status().code(),
        absl::StrCat("rank ", config_.rank, ": looking up rank ", peer,
                     "'s address: ", found.status().message()));
  }
  asio::post(io_, [this, peer, found = std::move(found)]() mutable {
    OnLookedUp(peer, std::move(found));
  });
}

void PeerConnector::OnLookedUp(
    int peer, absl::StatusOr<std::vector<Endpoint>> candidates) {
  if (closed_) return;
  if (!candidates.ok()) {
    sink_->OnConnectFailed(peer, candidates.status());
    return;
  }
  candidates_[peer] = *std::move(candidates);
  StartDial(peer);
}

}  // namespace hvd::transport::tcp_internal
