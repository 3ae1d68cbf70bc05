// What `hvdrun --self-test` measured and how it is reported: plain data and
// formatting, apart from the worker that measures (self_test_worker.cc).
#ifndef HVD_LAUNCHER_SELF_TEST_REPORT_H_
#define HVD_LAUNCHER_SELF_TEST_REPORT_H_

#include <cstddef>
#include <string>
#include <vector>

namespace hvd {
namespace launcher {

// An allreduce between ranks (hosts) a < b alone: all of it crosses their
// link, so bytes / time is the pair's bus bandwidth.
struct PairResult {
  int a = 0;
  int b = 0;
  double bytes_per_s = 0;
};

struct SelfTestReport {
  std::vector<std::string> hosts;  // by rank: one rank per host
  std::vector<PairResult> pairs;   // every pair, a < b
  size_t bytes = 0;                // per collective
  size_t allgather_bytes = 0;      // the allgather's whole output
  double allreduce_s = 0;          // the whole job's, median seconds
  double allgather_s = 0;

  // Pairs slower than `threshold` times the best pair.
  std::vector<PairResult> SlowPairs(double threshold) const;
  // Hosts (ranks) every pair of which is slow: with three hosts or more, a
  // host that is slow with everyone has the slow link (or is slow itself).
  std::vector<int> SlowHosts(double threshold) const;
  bool AnyBelow(double threshold) const {
    return !SlowPairs(threshold).empty();
  }
};

// The median of `v` (0 if empty).
double Median(std::vector<double> v);

// The report rank 0 prints: every pair against the best, the whole job's
// allreduce and allgather, then what is below the threshold, named.
std::string FormatReport(const SelfTestReport& report, double threshold);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_SELF_TEST_REPORT_H_
