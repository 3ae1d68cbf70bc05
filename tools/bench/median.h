// The median the benchmarks report: of an even count, the mean of the two
// middle values.
#ifndef HVD_TOOLS_BENCH_MEDIAN_H_
#define HVD_TOOLS_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace hvd::bench {

// `v` must not be empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace hvd::bench

#endif  // HVD_TOOLS_BENCH_MEDIAN_H_
