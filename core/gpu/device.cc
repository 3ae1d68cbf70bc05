#include "core/gpu/device.h"

#include <sys/prctl.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace hvd::gpu {

absl::Status WaitEvent(Event& event, absl::Time deadline,
                       const std::function<std::string()>& what,
                       const std::function<absl::Status()>& stop) {
  // Most ops finish within microseconds of being polled first: spin a
  // little, then back off so a long op costs no core. The naps stay short
  // (one poll every ~200 us costs nothing) so that an op just past the spin
  // is not noticed a millisecond late.
  const absl::Time spin_until = absl::Now() + absl::Microseconds(100);
  absl::Duration nap = absl::Microseconds(5);
  while (true) {
    auto done = event.Done();
    if (!done.ok()) {
      return absl::Status(done.status().code(),
                          absl::StrCat(what(), ": ", done.status().message()));
    }
    if (*done) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now < spin_until) {
      std::this_thread::yield();
      continue;
    }
    if (stop) {
      if (absl::Status s = stop(); !s.ok()) return s;
    }
    if (now > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          what(),
          " did not finish on the GPU within the timeout: a peer may "
          "be gone or stuck (HVD_TIMEOUT_SECONDS sets the limit)"));
    }
    absl::SleepFor(nap);
    nap = std::min(nap * 2, kLongestEventNap);
  }
}

void UsePreciseTimers() { prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); }

absl::Status SumOfOne(Device& device, const void* in, void* out, size_t count,
                      DataType dtype, double premul) {
  if (out != in) {
    if (absl::Status s = device.Copy(out, in, count * DataTypeSize(dtype));
        !s.ok()) {
      return s;
    }
  }
  return premul == 1.0 ? absl::OkStatus()
                       : device.Scale(out, count, dtype, premul);
}

}  // namespace hvd::gpu
