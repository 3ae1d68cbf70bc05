// What hvdrun --metrics-port adds to a rank, measured directly rather than
// as the difference of two noisy job timings: the counting one allreduce
// cycle does with metrics on (the collective and its bytes, the fusion
// buffer's fill, the cycle's negotiation and data-movement times, rank 0's
// stall), and one report (the rendered text and the resident set read),
// each the median of several timed batches.
//
//   bazel-bin/tools/bench/metrics_cost [--cycles 1000000] [--reports 2000]
//
// Prints "cycle_ns N" and "report_us N". tools/bench/metrics_overhead.py
// runs it and sets both against its jobs' time per allreduce (a report goes
// out every 2 s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "core/runtime/metrics.h"
#include "tools/bench/median.h"

namespace {

using Clock = std::chrono::steady_clock;

using ::hvd::bench::Median;

// Nanoseconds per call of `fn`, the median of 9 batches of `n` calls.
template <typename Fn>
double NsPerCall(long n, Fn fn) {
  std::vector<double> batches;
  for (int b = 0; b < 9; ++b) {
    const auto t0 = Clock::now();
    for (long i = 0; i < n; ++i) fn(i);
    const auto t1 = Clock::now();
    batches.push_back(std::chrono::duration<double, std::nano>(t1 - t0)
                          .count() / static_cast<double>(n));
  }
  return Median(batches);
}

}  // namespace

int main(int argc, char** argv) {
  long cycles = 1000000, reports = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cycles") == 0) {
      cycles = std::atol(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--reports") == 0) {
      reports = std::atol(argv[i + 1]);
    } else {
      std::fprintf(stderr, "metrics_cost: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  hvd::runtime::Metrics metrics;
  const std::string no_stall;
  // What the runtime does in one cycle of a 4 KiB allreduce loop.
  const double cycle_ns = NsPerCall(cycles / 9 + 1, [&](long i) {
    const absl::Time start = absl::Now();
    metrics.FusionFill(4096, 64 << 20);
    metrics.Collective(hvd::runtime::ALLREDUCE, 4096);
    metrics.Stall(no_stall);
    metrics.Negotiation(absl::Nanoseconds(i));
    metrics.DataMovement(absl::Now() - start);
  });
  std::string sink;
  const double report_ns = NsPerCall(reports / 9 + 1, [&](long) {
    sink = metrics.Render(hvd::runtime::ResidentBytes());
  });
  std::printf("cycle_ns %.1f\nreport_us %.1f\n", cycle_ns, report_ns / 1000);
  return sink.empty() ? 1 : 0;
}
