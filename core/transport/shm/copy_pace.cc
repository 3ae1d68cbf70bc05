#include "core/transport/shm/copy_pace.h"

#include <chrono>
#include <cstring>

#include "core/common/streaming_copy.h"

namespace hvd::transport::shm_internal {

CopyPace::Way CopyPace::Next(size_t bytes) {
  if (bytes < kTimedBytes || slow_mbps_ == 0) return Way::kPlain;
  if (!streaming_) return Way::kTimedPlain;
  if (until_probe_ > 0) {
    --until_probe_;
    return Way::kStreamed;
  }
  return Way::kTimedPlain;
}

void CopyPace::Timed(size_t bytes, int64_t nanos) {
  // bytes / nanos is GB/s; below slow_mbps / 1000 it is slow.
  const bool slow = static_cast<double>(bytes) * 1000 <
                    static_cast<double>(slow_mbps_) *
                        static_cast<double>(nanos < 1 ? 1 : nanos);
  if (!slow) {
    streaming_ = false;
    slow_in_a_row_ = 0;
    return;
  }
  if (streaming_ || ++slow_in_a_row_ >= kSlowToStream) {
    streaming_ = true;
    slow_in_a_row_ = 0;
    until_probe_ = kProbeEvery - 1;
  }
}

void PacedCopy(CopyPace& pace, char* dst, const char* src, size_t n) {
  switch (pace.Next(n)) {
    case CopyPace::Way::kPlain:
      std::memcpy(dst, src, n);
      return;
    case CopyPace::Way::kStreamed:
      StreamingCopy(dst, src, n);
      return;
    case CopyPace::Way::kTimedPlain: {
      using Clock = std::chrono::steady_clock;
      const Clock::time_point start = Clock::now();
      std::memcpy(dst, src, n);
      const int64_t nanos =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                               start)
              .count();
      pace.Timed(n, nanos);
      return;
    }
  }
}

}  // namespace hvd::transport::shm_internal
