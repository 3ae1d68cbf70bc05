// The loop half of Runtime: when a cycle runs and on which thread -- the
// background thread, or a caller waiting for its own handle (Drive) -- and
// what one cycle does with its outcome.
#include <sched.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/runtime/runtime.h"

namespace hvd::runtime {
namespace {

// A peer whose tensors wait on slower ranks sends its next list at once
// instead of sleeping a cycle (rank 0's gather paces those cycles), at most
// this many times in a row, so ranks that disagree forever (a stall) fall
// back to one cycle per HVD_CYCLE_TIME.
constexpr int kImmediateResends = 32;

// More idle cycles in a row than this count as this many (the wait has hit
// HVD_IDLE_CYCLE_TIME long before), so the count never overflows.
constexpr int kMaxIdleCycles = 64;

// The background thread leaves the cycles to callers this long after one
// drove: a caller that calls and waits in a loop comes back within
// microseconds, and would otherwise find its next op taken over.
constexpr absl::Duration kDriverGrace = absl::Microseconds(500);

// The longest the background thread sleeps while callers drive, unless a
// caller ends a drive longer than kDriverGrace (which wakes it): what work
// queued right after a short drive and then waited for by nobody may wait.
constexpr absl::Duration kDriverSleepCap = absl::Milliseconds(4);

// A caller that finds another caller in a cycle waits for its handle at
// most this long before it tries to run the next cycle itself.
constexpr absl::Duration kDriverRetry = absl::Microseconds(200);

// The same when the background thread holds the cycle: its release nudges
// the caller (LoopCycleLock), so this is only a bound. Retrying on the short
// timer instead would wake the caller every 200 us through the background
// thread's collectives -- a training step's, which the framework thread
// waits for once backward is done -- and on a rank bound to one core each
// wakeup takes that core from the collective.
constexpr absl::Duration kLoopCycleRetry = absl::Milliseconds(5);

// How long, in one drive, a caller whose op runs on a GPU stream polls the
// device backend (yielding the CPU between polls) before it sleeps until
// the backend's completion thread completes the op: long enough for a small
// op's launch and run, short enough that a long one costs no core.
constexpr absl::Duration kDevicePoll = absl::Microseconds(200);

// The cycle lock, held by the background thread. Its release nudges the
// callers whose drive found it taken: the cycle may have left their op to
// them (a cycle that only voted, or waited for work, completes nothing), and
// they should not sleep out kDriverRetry -- 250 us with the timer's slack,
// on every call that follows a training step.
// `holds` is set while the lock is held.
class ABSL_SCOPED_LOCKABLE LoopCycleLock {
 public:
  LoopCycleLock(absl::Mutex* mu, HandleTable* handles, std::atomic<bool>* holds)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu), handles_(handles), holds_(holds) {
    mu_->Lock();
    holds_->store(true, std::memory_order_release);
  }
  ~LoopCycleLock() ABSL_UNLOCK_FUNCTION() {
    holds_->store(false, std::memory_order_release);
    mu_->Unlock();
    handles_->Nudge();
  }
  LoopCycleLock(const LoopCycleLock&) = delete;
  LoopCycleLock& operator=(const LoopCycleLock&) = delete;

 private:
  absl::Mutex* const mu_;
  HandleTable* const handles_;
  std::atomic<bool>* const holds_;
};

}  // namespace

void Runtime::Loop() {
  while (true) {
    bool wait_for_work;
    absl::Time cycle_end, last_busy;
    {
      LoopCycleLock cycle(&cycle_mu_, handles_, &loop_holds_cycle_);
      if (loop_ended_) return;
      wait_for_work = WaitsForWork();
      cycle_end = CycleEnd();
      last_busy = last_busy_;
    }
    if (!AwaitTurn(wait_for_work, cycle_end, last_busy)) continue;
    // A caller that waits for the burst it just submitted runs the cycle
    // itself: this thread running it instead would share the caller's core
    // with it while the caller takes its results one by one, and a rank
    // descheduled in a ring stalls every rank.
    if (!SettleSubmissions()) continue;
    LoopCycleLock cycle(&cycle_mu_, handles_, &loop_holds_cycle_);
    // A caller's cycle meanwhile may have taken the work this thread woke
    // for, or made this one a cycle that waits for work: look again.
    if (WaitsForWork() && !CycleDue()) continue;
    if (loop_ended_ || !RunCycle(/*waited=*/true)) return;
  }
}

bool Runtime::WaitsForWork() {
  // A rank other than 0 sends its list when it has work, at its timer, or
  // at once when it is due to send it again. Rank 0 gathers at once, but
  // before a cycle that starts with the cached-step vote it waits the same
  // way while it has nothing to vote for: an empty vote would send every
  // rank's step the long way, through its gather.
  if (config_.rank != 0 || config_.size == 1) return !resend_now_;
  return VotesFirst() && !CycleHasWork();
}

bool Runtime::CycleDue() {
  if (CycleHasWork() || absl::Now() >= CycleEnd()) return true;
  absl::MutexLock lock(&mu_);
  return Over();
}

bool Runtime::AwaitTurn(bool wait_for_work, absl::Time cycle_end,
                        absl::Time last_busy) {
  {
    // While callers drive it sleeps on a timer that backs off (a caller
    // calling in a loop comes and goes too often to wake it each time), or
    // until a caller ends a long drive; then for the grace after the last.
    absl::MutexLock lock(&mu_);
    auto over = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return Over(); };
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return long_drive_ended_ || Over();
    };
    absl::Duration sleep = kDriverGrace;
    while (!Over()) {
      const absl::Time now = absl::Now();
      if (drivers_ > 0) {
        mu_.AwaitWithDeadline(absl::Condition(&woken), now + sleep);
        long_drive_ended_ = false;
        sleep = std::min(2 * sleep, kDriverSleepCap);
        continue;
      }
      const absl::Time grace_end = last_driven_ + kDriverGrace;
      if (now >= grace_end) break;
      mu_.AwaitWithDeadline(absl::Condition(&over), grace_end);
    }
  }
  if (!wait_for_work) return true;
  WaitForWork(cycle_end, last_busy);
  absl::MutexLock lock(&mu_);
  return drivers_ == 0 || Over();
}

bool Runtime::WaitForWork(absl::Time cycle_end, absl::Time last_busy) {
  // Work tends to follow work (a training step submits tensor after tensor,
  // a benchmark call after call): right after a busy cycle, poll for it a
  // little instead of sleeping, which would cost a thread wakeup -- tens of
  // microseconds on a busy VM -- per call. Idle cycles never poll.
  if (!has_work_.load(std::memory_order_acquire) &&
      absl::Now() - last_busy < config_.background_spin) {
    const absl::Time spin_end =
        std::min(cycle_end, last_busy + config_.background_spin);
    while (!has_work_.load(std::memory_order_acquire) &&
           absl::Now() < spin_end) {
      sched_yield();  // The thread that will submit may need this CPU.
    }
  }
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || Over();
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), cycle_end);
  return stop_requested_;
}

void Runtime::Drive(int64_t handle, absl::Time deadline) {
  // A done handle (the rest of a step the caller's first wait ran) needs no
  // cycle: nor the driver count, whose lock wakes the background thread's
  // waits to look at it.
  if (!config_.caller_progress) return;
  const std::shared_ptr<const std::atomic<bool>> done =
      handles_->DoneFlag(handle);
  auto running = [&done]() { return !done->load(std::memory_order_acquire); };
  if (done == nullptr || !running()) return;
  const absl::Time start = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    ++drivers_;
  }
  // Set when the op is first found off the cycles.
  absl::Time poll_end = absl::InfinitePast();
  // The first look at the deadline uses `start`: one clock read less in a
  // call that one cycle completes.
  auto before_deadline = [&, first = true]() mutable {
    const bool before = (first ? start : absl::Now()) < deadline;
    first = false;
    return before;
  };
  while (running() && before_deadline()) {
    const uint64_t nudges = handles_->Nudges();
    if (!cycle_mu_.TryLock()) {
      // Read after the nudge count: a release since then has nudged.
      const absl::Duration retry =
          loop_holds_cycle_.load(std::memory_order_acquire) ? kLoopCycleRetry
                                                            : kDriverRetry;
      handles_->WaitUnlessNudged(
          handle, std::min(absl::Now() + retry, deadline), nudges);
      continue;
    }
    if (!loop_ended_ && !CycleHasWork()) {
      // The op left the cycles (a GPU stream runs it) and nothing else waits
      // for one: a cycle would sleep until its timer while the handle
      // completes, so poll the device for a while (completing the op here
      // spares two thread wakeups), then wait for the handle.
      cycle_mu_.Unlock();
      if (poll_end == absl::InfinitePast()) {
        poll_end = std::min(absl::Now() + kDevicePoll, deadline);
      }
      if (absl::Now() < poll_end && PollDevice(handle, poll_end)) continue;
      handles_->Wait(handle, std::min(absl::Now() + kDriverRetry, deadline));
      continue;
    }
    const bool ended =
        loop_ended_ || (running() && !RunCycle(/*waited=*/false));
    cycle_mu_.Unlock();
    if (ended) break;
  }
  absl::MutexLock lock(&mu_);
  --drivers_;
  last_driven_ = absl::Now();
  if (last_driven_ - start >= kDriverGrace) long_drive_ended_ = true;
}

bool Runtime::PollDevice(int64_t handle, absl::Time until) {
  if (device_ops_ == nullptr) return false;
  while (true) {
    // Progress first: a caller whose op just left the cycle finds it in
    // flight even when the handle is done before the next poll.
    const bool in_flight = device_ops_->Progress();
    if (handles_->Poll(handle) != 0 ||
        has_work_.load(std::memory_order_acquire)) {
      return true;  // back to the drive loop: done, or a cycle to run
    }
    if (!in_flight || absl::Now() >= until) return false;
    sched_yield();  // The backend's threads may need this CPU.
  }
}

bool Runtime::CycleHasWork() {
  return resend_now_ || !pending_.empty() ||
         has_work_.load(std::memory_order_acquire);
}

bool Runtime::SettleSubmissions() {
  if (config_.submit_settle <= absl::ZeroDuration()) return true;
  const absl::Time cap = absl::Now() + config_.cycle_time;
  absl::MutexLock lock(&mu_);
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return drivers_ > 0 || Over();
  };
  while (true) {
    const bool burst = queue_.size() >= 2 ||
                       (!queue_.empty() && last_submit_ - previous_submit_ <
                                               config_.submit_settle);
    if (!burst || Over()) return true;
    const absl::Time now = absl::Now();
    const absl::Time settled = last_submit_ + config_.submit_settle;
    if (now >= settled || now >= cap) return true;
    if (mu_.AwaitWithDeadline(absl::Condition(&woken),
                              std::min(settled, cap))) {
      return Over();
    }
  }
}

bool Runtime::RunCycle(bool waited) {
  if (CycleBody(waited)) return true;
  loop_ended_ = true;
  return false;
}

bool Runtime::CycleBody(bool waited) {
  if (FailIfAborted()) return false;
  absl::StatusOr<const ResponseList*> step;
  bool busy = false;
  // One clock read for the cycle's start, one for its end (and one more
  // between negotiation and data when metrics are counted): a 4 KiB call
  // costs a few microseconds, and each read tens of nanoseconds.
  if (config_.rank == 0 && config_.size > 1) {
    cycle_start_ = absl::Now();
    step = CoordinatorCycle(&busy);
  } else {
    step = MemberCycle(waited, &busy);
  }
  const absl::Time data_start = Reports() ? absl::Now() : absl::InfinitePast();
  if (!step.ok()) {
    FailAll(step.status());
    return false;
  }
  const ResponseList& responses = **step;
  if (absl::Status s = Execute(responses); !s.ok()) {
    FailAll(s);
    return false;
  }
  const bool worked = busy || responses.responses_size() > 0;
  if (worked) {
    last_busy_ = absl::Now();
    // Idle cycles (rank 0 waits for the peers' lists in them) count as
    // neither.
    if (Reports()) {
      metrics_.Negotiation(data_start - cycle_start_);
      metrics_.DataMovement(last_busy_ - data_start);
    }
  }
  idle_cycles_ =
      responses.idle() ? std::min(idle_cycles_ + 1, kMaxIdleCycles) : 0;
  if (!responses.shutdown().empty()) {
    // A stall ends the job (Aborted, its own exception in Python); any
    // other shutdown is a rank's hvd.shutdown (FailedPrecondition).
    const std::string why =
        absl::StrCat("hvd has been shut down: ", responses.shutdown());
    FailAll(absl::StartsWith(responses.shutdown(), kStallShutdownPrefix)
                ? absl::AbortedError(why)
                : absl::FailedPreconditionError(why));
    return false;
  }
  if (responses.responses_size() > 0) resends_ = 0;
  // Only a step of the global set can be agreed by the exchange: after one
  // of another set, rank 0 (perhaps outside it) would wait for work for it.
  try_exchange_ =
      std::any_of(responses.responses().begin(), responses.responses().end(),
                  [](const Response& r) { return r.process_set() == 0; });
  // Tensors of this rank still pending -- waiting on slower ranks, or left
  // over when rank 0 answered only part of what it sent -- go back at once,
  // not at the next cycle timer (a caller waiting for them would wait that
  // long); at most kImmediateResends cycles in a row without progress.
  resend_now_ = !pending_.empty() && ++resends_ <= kImmediateResends;
  return true;
}

}  // namespace hvd::runtime
