#include "core/transport/composite/composite_context.h"

#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace hvd::transport {
namespace {

// What requests share with their context: the children, until the context
// is destroyed (children's own requests keep their transports alive, so a
// late Wait() is safe; it can then no longer abort the others).
class Shared {
 public:
  explicit Shared(std::vector<std::unique_ptr<Context>> children)
      : children_(std::move(children)) {}

  void AbortAll(const absl::Status& reason) {
    absl::MutexLock lock(&mu_);
    if (aborted_) return;
    aborted_ = true;
    for (auto& child : children_) child->Abort(reason);
  }
  absl::Status status() const {
    // The child that failed first holds the cause; AbortAll gave the others
    // the same status.
    absl::MutexLock lock(&mu_);
    for (const auto& child : children_) {
      absl::Status s = child->status();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // Only while the context lives (it calls DestroyChildren last).
  Context* child(int index) const { return raw_[index]; }
  void DestroyChildren() {
    std::vector<std::unique_ptr<Context>> doomed;
    {
      absl::MutexLock lock(&mu_);
      doomed.swap(children_);
    }
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Context>> children_ ABSL_GUARDED_BY(mu_);
  const std::vector<Context*> raw_ = Raw(children_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;

  static std::vector<Context*> Raw(
      const std::vector<std::unique_ptr<Context>>& children) {
    std::vector<Context*> raw;
    for (const auto& c : children) raw.push_back(c.get());
    return raw;
  }
};

class CompositeRequest final : public Request {
 public:
  CompositeRequest(std::shared_ptr<Shared> shared,
                   std::unique_ptr<Request> inner)
      : shared_(std::move(shared)), inner_(std::move(inner)) {}

  absl::Status Wait(absl::Time deadline) override {
    absl::Status status = inner_->Wait(deadline);
    if (!status.ok() && !absl::IsDeadlineExceeded(status)) {
      shared_->AbortAll(status);
    }
    return status;
  }
  bool Done() override { return inner_->Done(); }

 private:
  const std::shared_ptr<Shared> shared_;
  const std::unique_ptr<Request> inner_;
};

class CompositeContext final : public Context {
 public:
  CompositeContext(std::shared_ptr<Shared> shared, std::vector<int> route,
                   int rank, int size)
      : shared_(std::move(shared)),
        route_(std::move(route)),
        rank_(rank),
        size_(size) {}
  ~CompositeContext() override { shared_->DestroyChildren(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::unique_ptr<Request> Send(int peer, const void* data,
                                size_t len) override {
    Context* child = Route(peer);
    if (child == nullptr) return BadPeer("Send to", peer);
    return Wrap(child->Send(peer, data, len));
  }
  std::unique_ptr<Request> Recv(int peer, void* data, size_t len) override {
    Context* child = Route(peer);
    if (child == nullptr) return BadPeer("Recv from", peer);
    return Wrap(child->Recv(peer, data, len));
  }
  std::unique_ptr<Request> RecvStreaming(int peer, void* data,
                                         size_t len) override {
    Context* child = Route(peer);
    if (child == nullptr) return BadPeer("Recv from", peer);
    return Wrap(child->RecvStreaming(peer, data, len));
  }
  bool ReducesOnReceive(int peer) const override {
    Context* child = Route(peer);
    return child != nullptr && child->ReducesOnReceive(peer);
  }
  std::unique_ptr<Request> RecvReduce(int peer, size_t len,
                                      ReceiveReducer reducer) override {
    Context* child = Route(peer);
    if (child == nullptr) return BadPeer("Recv from", peer);
    // Unwrapped: a child that cannot is not a failure of the context.
    if (!child->ReducesOnReceive(peer)) {
      return child->RecvReduce(peer, len, std::move(reducer));
    }
    return Wrap(child->RecvReduce(peer, len, std::move(reducer)));
  }
  std::unique_ptr<Request> RecvAny(int peer, std::string* out) override {
    Context* child = Route(peer);
    if (child == nullptr) return BadPeer("RecvAny from", peer);
    return Wrap(child->RecvAny(peer, out));
  }

  void Abort(absl::Status reason) override {
    if (reason.ok()) {
      reason = absl::AbortedError("Abort() called with OK status");
    }
    shared_->AbortAll(reason);
  }

  absl::Status status() const override { return shared_->status(); }

  std::string PeerAddress(int peer) const override {
    Context* child = Route(peer);
    return child == nullptr ? std::string() : child->PeerAddress(peer);
  }

 private:
  Context* Route(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_) return nullptr;
    return shared_->child(route_[peer]);
  }
  std::unique_ptr<Request> Wrap(std::unique_ptr<Request> inner) {
    return std::make_unique<CompositeRequest>(shared_, std::move(inner));
  }
  std::unique_ptr<Request> BadPeer(absl::string_view what, int peer) const {
    return std::make_unique<FailedRequest>(absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": ", what, " rank ", peer,
                     ", which is not another rank of this size-", size_,
                     " context")));
  }

  const std::shared_ptr<Shared> shared_;
  const std::vector<int> route_;
  const int rank_;
  const int size_;
};

// The child every peer routes to, when there are peers and it is one.
std::optional<int> OnlyRoute(const std::vector<int>& child_of_peer, int rank) {
  std::optional<int> only;
  for (int peer = 0; peer < static_cast<int>(child_of_peer.size()); ++peer) {
    if (peer == rank) continue;
    if (only.has_value() && *only != child_of_peer[peer]) return std::nullopt;
    only = child_of_peer[peer];
  }
  return only;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Context>> NewCompositeContext(
    std::vector<std::unique_ptr<Context>> children,
    std::vector<int> child_of_peer) {
  if (children.empty()) {
    return absl::InvalidArgumentError("NewCompositeContext: no children");
  }
  const int rank = children[0]->rank();
  const int size = children[0]->size();
  for (size_t i = 0; i < children.size(); ++i) {
    if (children[i] == nullptr || children[i]->rank() != rank ||
        children[i]->size() != size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "NewCompositeContext: child ", i, " is not rank ", rank,
          " of a size-", size, " context like child 0"));
    }
  }
  if (child_of_peer.size() != static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NewCompositeContext: ", child_of_peer.size(),
                     " routes for a size-", size, " context"));
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const int c = child_of_peer[peer];
    if (c < 0 || static_cast<size_t>(c) >= children.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("NewCompositeContext: peer ", peer, " routed to child ",
                       c, " of ", children.size()));
    }
  }
  if (std::optional<int> only = OnlyRoute(child_of_peer, rank)) {
    // Every peer is reached through one child: the others would carry
    // nothing, and the composite would wrap each of its requests in one more.
    return std::move(children[*only]);
  }
  auto shared = std::make_shared<Shared>(std::move(children));
  return std::unique_ptr<Context>(std::make_unique<CompositeContext>(
      std::move(shared), std::move(child_of_peer), rank, size));
}

}  // namespace hvd::transport
