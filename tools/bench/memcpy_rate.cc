// The one-core memcpy rate, the anchor of a large allreduce's bus bandwidth:
// copies one buffer of BYTES into another, warm, and prints the median rate.
//
//   bazel run -c opt //tools/bench:memcpy_rate -- [BYTES [ITERATIONS]]
//
// BYTES defaults to 64 MiB (67108864), ITERATIONS to 20.
//
// Prints `memcpy BYTES median_us GB/s` (GB/s = BYTES / median time, the
// measure hvd_bench's algbw uses).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;
  int iterations = 20;
  if (argc > 3 || (argc > 1 && (!absl::SimpleAtoi(argv[1], &bytes) ||
                                  bytes == 0)) ||
      (argc > 2 && (!absl::SimpleAtoi(argv[2], &iterations) ||
                    iterations < 1))) {
    std::fprintf(stderr,
                 "usage: memcpy_rate [BYTES [ITERATIONS]]: positive integers "
                 "(defaults 67108864 and 20)\n");
    return 2;
  }
  std::vector<char> from(bytes, 1), to(bytes, 0);
  std::memcpy(to.data(), from.data(), bytes);  // warm: pages touched
  std::vector<double> us;
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    us.push_back(std::chrono::duration<double, std::micro>(
                     std::chrono::steady_clock::now() - start)
                     .count());
    // A source that changes between copies, so no copy can be elided.
    from[i % bytes] = static_cast<char>(to[(i * 7) % bytes] + 1);
  }
  std::sort(us.begin(), us.end());
  const double median = us[us.size() / 2];
  std::printf("memcpy %zu %.1f %.3f\n", bytes, median, bytes / median / 1e3);
  return 0;
}
