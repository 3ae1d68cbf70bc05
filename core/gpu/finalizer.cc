#include "core/gpu/finalizer.h"

#include <utility>

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

}  // namespace

Finalizer::Finalizer(std::function<void(const absl::Status&)> on_failure)
    : on_failure_(std::move(on_failure)) {
  thread_ = std::thread([this] { Loop(); });
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
  absl::MutexLock lock(&mu_);
  ++added_;
  queue_.push_back(std::move(item));
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

void Finalizer::Loop() {
  UsePreciseTimers();  // its naps between polls of the GPU
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stop_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stop_ and nothing left
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status status = item.status;
    if (status.ok()) status = AbortStatus();
    if (status.ok() && item.event) {
      auto stop = [this, &item]() -> absl::Status {
        if (absl::Status s = AbortStatus(); !s.ok()) return s;
        for (const auto& comm : item.comms) {
          if (absl::Status s = comm->Health(); !s.ok()) return s;
        }
        return absl::OkStatus();
      };
      status = WaitEvent(*item.event, item.deadline, item.what, stop);
      if (!status.ok() && AbortStatus().ok() && on_failure_) {
        on_failure_(status);
      }
    }
    Complete(item, status);
    item = Item();  // entries and results go before the count moves
    absl::MutexLock lock(&mu_);
    ++completed_;
  }
}

}  // namespace hvd::gpu
