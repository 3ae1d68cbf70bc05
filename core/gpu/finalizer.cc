#include "core/gpu/finalizer.h"

#include <utility>

#include "core/common/thread_role.h"

namespace hvd::gpu {
namespace {

void Complete(Finalizer::Item& item, const absl::Status& status) {
  for (size_t i = 0; i < item.entries.size(); ++i) {
    runtime::TensorEntry* entry = item.entries[i].get();
    if (entry == nullptr || !entry->done) continue;
    runtime::OpResult result;
    if (status.ok() && i < item.results.size()) {
      result = std::move(item.results[i]);
    }
    auto done = std::move(entry->done);
    entry->done = nullptr;
    done(status, std::move(result));
  }
}

// Whether `item` has finished without a failure: queued fine and its event
// (if any) fired.
bool FinishedFine(Finalizer::Item& item) {
  if (!item.status.ok()) return false;
  if (!item.event) return true;
  absl::StatusOr<bool> done = item.event->Done();
  return done.ok() && *done;
}

// WaitEvent over a poll of the completion thread's own.
class PolledEvent : public Event {
 public:
  explicit PolledEvent(std::function<absl::StatusOr<bool>()> poll)
      : poll_(std::move(poll)) {}
  absl::StatusOr<bool> Done() override { return poll_(); }

 private:
  std::function<absl::StatusOr<bool>()> poll_;
};

}  // namespace

Finalizer::Finalizer(std::function<void(const absl::Status&)> on_failure)
    : on_failure_(std::move(on_failure)) {
  thread_ = std::thread([this] {
    NameThisThread("hvd-gpu-finish");
    Loop();
  });
}

Finalizer::~Finalizer() {
  Abort(absl::CancelledError("the hvd GPU backend was shut down"));
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Finalizer::Add(Item item) {
  auto shared = std::make_shared<Item>(std::move(item));
  absl::MutexLock lock(&mu_);
  ++added_;
  queue_.push_back(std::move(shared));
}

bool Finalizer::TryComplete() {
  bool any = false;
  while (true) {
    std::shared_ptr<Item> head;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty() || claimed_ || !aborted_.ok()) return any;
      head = queue_.front();
      claimed_ = true;
    }
    if (!FinishedFine(*head)) {
      Unclaim();
      return any;
    }
    CompleteHead(*head, absl::OkStatus());
    any = true;
  }
}

bool Finalizer::Pending() {
  absl::MutexLock lock(&mu_);
  return !queue_.empty();
}

bool Finalizer::Drain(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const int64_t target = added_;
  auto drained = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return completed_ >= target;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&drained), deadline);
}

void Finalizer::Abort(const absl::Status& reason) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = reason;
}

absl::Status Finalizer::AbortStatus() {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

Finalizer::Claim Finalizer::TryClaim(int64_t seq) {
  absl::MutexLock lock(&mu_);
  if (completed_ != seq) return Claim::kGone;
  if (claimed_) return Claim::kBusy;
  claimed_ = true;
  return Claim::kTaken;
}

bool Finalizer::ClaimOrGone(int64_t seq) {
  absl::MutexLock lock(&mu_);
  auto free = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !claimed_ || completed_ != seq;
  };
  mu_.Await(absl::Condition(&free));
  if (completed_ != seq) return false;
  claimed_ = true;
  return true;
}

void Finalizer::Unclaim() {
  absl::MutexLock lock(&mu_);
  claimed_ = false;
}

void Finalizer::CompleteHead(Item& item, const absl::Status& status) {
  Complete(item, status);
  // Entries and results go before the count moves (Drain's callers may free
  // what they point into); the rest may still be read by the completion
  // thread, which keeps the item.
  item.entries.clear();
  item.results.clear();
  absl::MutexLock lock(&mu_);
  queue_.pop_front();
  ++completed_;
  claimed_ = false;
}

void Finalizer::Loop() {
  UsePreciseTimers();  // its naps between polls of the GPU
  while (true) {
    std::shared_ptr<Item> head;
    int64_t seq;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stop_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stop_ and nothing left
      head = queue_.front();
      seq = completed_;
    }
    Settle(seq, *head);
  }
}

void Finalizer::Settle(int64_t seq, Item& item) {
  absl::Status status = item.status;
  if (status.ok()) status = AbortStatus();
  const bool wait = status.ok() && item.event != nullptr;
  if (wait) {
    // One poll at a time under the claim, so that a caller in TryComplete
    // can complete the item between two of this thread's polls.
    PolledEvent head([this, seq, &item]() -> absl::StatusOr<bool> {
      switch (TryClaim(seq)) {
        case Claim::kGone:
          return true;
        case Claim::kBusy:
          return false;
        case Claim::kTaken:
          break;
      }
      absl::StatusOr<bool> done = item.event->Done();
      if (done.ok() && *done) {
        CompleteHead(item, absl::OkStatus());
        return true;
      }
      Unclaim();
      return done;
    });
    auto stop = [this, &item]() -> absl::Status {
      if (absl::Status s = AbortStatus(); !s.ok()) return s;
      for (const auto& comm : item.comms) {
        if (absl::Status s = comm->Health(); !s.ok()) return s;
      }
      return absl::OkStatus();
    };
    status = WaitEvent(head, item.deadline, item.what, stop);
    if (status.ok()) return;  // completed, here or by another thread
  }
  if (!ClaimOrGone(seq)) return;  // a caller completed it just now
  if (wait && AbortStatus().ok() && on_failure_) on_failure_(status);
  CompleteHead(item, status);
}

}  // namespace hvd::gpu
