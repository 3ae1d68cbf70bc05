#include "launcher/self_test_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hvd {
namespace launcher {
namespace {

const PairResult* Best(const std::vector<PairResult>& pairs) {
  const PairResult* best = nullptr;
  for (const PairResult& p : pairs) {
    if (best == nullptr || p.bytes_per_s > best->bytes_per_s) best = &p;
  }
  return best;
}

std::string PairName(const SelfTestReport& r, const PairResult& p) {
  return absl::StrCat(r.hosts.at(p.a), " <-> ", r.hosts.at(p.b));
}

double GBps(double bytes_per_s) { return bytes_per_s / 1e9; }

}  // namespace

std::vector<PairResult> SelfTestReport::SlowPairs(double threshold) const {
  std::vector<PairResult> slow;
  const PairResult* best = Best(pairs);
  if (best == nullptr) return slow;
  for (const PairResult& p : pairs) {
    if (p.bytes_per_s < threshold * best->bytes_per_s) slow.push_back(p);
  }
  return slow;
}

std::vector<int> SelfTestReport::SlowHosts(double threshold) const {
  std::vector<int> hosts_slow;
  if (hosts.size() < 3) return hosts_slow;
  const std::vector<PairResult> slow = SlowPairs(threshold);
  for (int h = 0; h < static_cast<int>(hosts.size()); ++h) {
    int theirs = 0, slow_theirs = 0;
    for (const PairResult& p : pairs) theirs += p.a == h || p.b == h;
    for (const PairResult& p : slow) slow_theirs += p.a == h || p.b == h;
    if (theirs > 0 && slow_theirs == theirs) hosts_slow.push_back(h);
  }
  return hosts_slow;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string FormatReport(const SelfTestReport& r, double threshold) {
  const size_t n = r.hosts.size();
  std::string out = absl::StrFormat(
      "hvd self-test: %d hosts, %.1f MiB per collective\n\n", n,
      r.bytes / 1048576.0);
  const PairResult* best = Best(r.pairs);
  if (best != nullptr) {
    absl::StrAppendFormat(&out, "%-36s %12s %8s\n", "pair", "busbw GB/s",
                          "of best");
    for (const PairResult& p : r.pairs) {
      const double of_best = p.bytes_per_s / best->bytes_per_s;
      absl::StrAppendFormat(&out, "%-36s %12.3f %7.0f%%%s\n", PairName(r, p),
                            GBps(p.bytes_per_s), 100 * of_best,
                            of_best < threshold ? "  SLOW" : "");
    }
    out += "\n";
  }
  absl::StrAppendFormat(&out, "%-36s %12s\n", "whole job", "busbw GB/s");
  if (n > 1 && r.allreduce_s > 0 && r.allgather_s > 0) {
    absl::StrAppendFormat(&out, "%-36s %12.3f\n", "allreduce",
                          GBps(r.bytes / r.allreduce_s * 2 * (n - 1) / n));
    absl::StrAppendFormat(
        &out, "%-36s %12.3f\n", "allgather",
        GBps(r.allgather_bytes / r.allgather_s * (n - 1) / n));
  }
  if (best == nullptr) return out + "\nno pair of hosts to compare\n";
  const std::vector<PairResult> slow = r.SlowPairs(threshold);
  if (slow.empty()) {
    return out + absl::StrFormat(
                     "\nevery pair within %.0f%% of the best (%s, %.3f GB/s)\n",
                     100 * threshold, PairName(r, *best),
                     GBps(best->bytes_per_s));
  }
  absl::StrAppendFormat(&out, "\nbelow %.0f%% of the best pair (%s, %.3f GB/s):\n",
                        100 * threshold, PairName(r, *best),
                        GBps(best->bytes_per_s));
  for (const PairResult& p : slow) {
    absl::StrAppendFormat(&out, "  %s: %.0f%%\n", PairName(r, p),
                          100 * p.bytes_per_s / best->bytes_per_s);
  }
  for (int h : r.SlowHosts(threshold)) {
    absl::StrAppendFormat(&out,
                          "  host %s: every pair through it is slow: its link "
                          "or the host itself\n",
                          r.hosts[h]);
  }
  return out;
}

}  // namespace launcher
}  // namespace hvd
