#include "core/runtime/handle_table.h"

#include <sched.h>

#include <algorithm>


namespace hvd::runtime {

void HandleTable::SetWaitSpin(absl::Duration spin) {
  spin_ns_.store(absl::ToInt64Nanoseconds(std::max(spin, absl::ZeroDuration())),
                 std::memory_order_relaxed);
}

std::shared_ptr<HandleTable::State> HandleTable::Find(int64_t handle) {
  auto it = states_.find(handle);
  return it == states_.end() ? nullptr : it->second;
}

int64_t HandleTable::Create(int parts) {
  auto state = std::make_shared<State>();
  state->pending = parts;
  state->results.resize(parts);
  absl::MutexLock lock(&mu_);
  const int64_t handle = next_++;
  states_[handle] = std::move(state);
  return handle;
}

int64_t HandleTable::CreateFailed(absl::Status status) {
  auto state = std::make_shared<State>();
  state->error_text = std::string(status.message());
  state->status = std::move(status);
  state->done.store(true);
  absl::MutexLock lock(&mu_);
  const int64_t handle = next_++;
  states_[handle] = std::move(state);
  return handle;
}

void HandleTable::Complete(int64_t handle, int part, const absl::Status& status,
                           OpResult result) {
  absl::MutexLock lock(&mu_);
  auto state = Find(handle);
  if (state == nullptr || state->pending == 0) return;
  if (!status.ok() && state->status.ok()) {
    state->status = status;
    state->error_text = std::string(status.message());
  }
  if (part >= 0 && part < static_cast<int>(state->results.size())) {
    state->results[part] = std::move(result);
  }
  if (--state->pending == 0) state->done.store(true, std::memory_order_release);
}

std::shared_ptr<const std::atomic<bool>> HandleTable::DoneFlag(int64_t handle) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<State> state = Find(handle);
  if (state == nullptr) return nullptr;
  return std::shared_ptr<const std::atomic<bool>>(state, &state->done);
}

int HandleTable::Poll(int64_t handle) {
  absl::MutexLock lock(&mu_);
  auto state = Find(handle);
  if (state == nullptr) return -1;
  return state->pending == 0 ? 1 : 0;
}

HandleTable::WaitResult HandleTable::Wait(int64_t handle, absl::Time deadline) {
  return WaitFor(handle, deadline, std::nullopt);
}

HandleTable::WaitResult HandleTable::WaitUnlessNudged(int64_t handle,
                                                      absl::Time deadline,
                                                      uint64_t seen) {
  return WaitFor(handle, deadline, seen);
}

void HandleTable::Nudge() {
  absl::MutexLock lock(&mu_);
  nudges_.fetch_add(1, std::memory_order_release);
}

HandleTable::WaitResult HandleTable::WaitFor(int64_t handle,
                                             absl::Time deadline,
                                             std::optional<uint64_t> seen) {
  std::shared_ptr<State> state;
  {
    absl::MutexLock lock(&mu_);
    state = Find(handle);
    if (state == nullptr) return kInvalid;
    if (state->pending == 0) return kDone;
  }
  // A small op completes within microseconds; polling for it saves the
  // wakeup of a sleeping thread.
  const absl::Duration spin =
      absl::Nanoseconds(spin_ns_.load(std::memory_order_relaxed));
  if (spin > absl::ZeroDuration()) {
    const absl::Time end = std::min(absl::Now() + spin, deadline);
    while (absl::Now() < end) {
      if (state->done.load(std::memory_order_acquire)) return kDone;
      if (seen.has_value() && Nudges() != *seen) return kTimeout;
      sched_yield();  // The background thread may need this CPU.
    }
  }
  absl::MutexLock lock(&mu_);
  State* s = state.get();
  auto over = [this, s, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return s->pending == 0 ||
           (seen.has_value() &&
            nudges_.load(std::memory_order_relaxed) != *seen);
  };
  if (deadline == absl::InfiniteFuture()) {
    mu_.Await(absl::Condition(&over));
  } else {
    mu_.AwaitWithDeadline(absl::Condition(&over), deadline);
  }
  return s->pending == 0 ? kDone : kTimeout;
}

std::optional<bool> HandleTable::DoneOk(int64_t handle) {
  absl::MutexLock lock(&mu_);
  auto it = states_.find(handle);
  if (it == states_.end() || it->second->pending != 0) return std::nullopt;
  return it->second->status.ok();
}

absl::Status HandleTable::GetStatus(int64_t handle) {
  absl::MutexLock lock(&mu_);
  auto state = Find(handle);
  if (state == nullptr || state->pending != 0) return absl::OkStatus();
  return state->status;
}

const char* HandleTable::ErrorText(int64_t handle) {
  absl::MutexLock lock(&mu_);
  auto state = Find(handle);
  return state == nullptr ? nullptr : state->error_text.c_str();
}

int HandleTable::OutputCount(int64_t handle) {
  absl::MutexLock lock(&mu_);
  auto state = Find(handle);
  if (state == nullptr) return -1;
  int count = 0;
  for (const auto& r : state->results) count += r.output != nullptr;
  return count;
}

bool HandleTable::TakeResult(int64_t handle, int index, OpResult* out) {
  absl::MutexLock lock(&mu_);
  auto state = Find(handle);
  if (state == nullptr || state->pending != 0 || index < 0 ||
      index >= static_cast<int>(state->results.size())) {
    return false;
  }
  // Only the buffers move: shape, splits and value stay readable.
  OpResult& kept = state->results[index];
  *out = kept;
  kept.output.reset();
  return true;
}

bool HandleTable::PeekResult(int64_t handle, int index, OpResult* out) {
  absl::MutexLock lock(&mu_);
  auto state = Find(handle);
  if (state == nullptr || state->pending != 0 || index < 0 ||
      index >= static_cast<int>(state->results.size())) {
    return false;
  }
  const OpResult& r = state->results[index];
  out->shape = r.shape;
  out->dtype = r.dtype;
  out->received_splits = r.received_splits;
  out->value = r.value;
  return true;
}

void HandleTable::Release(int64_t handle) {
  std::shared_ptr<State> doomed;  // Freed outside the lock.
  absl::MutexLock lock(&mu_);
  auto it = states_.find(handle);
  if (it == states_.end()) return;
  doomed = std::move(it->second);
  states_.erase(it);
}

}  // namespace hvd::runtime
