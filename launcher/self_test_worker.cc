// hvd-selftest: the worker of `hvdrun --self-test`, one rank per host, as
// nccl-tests is run before a big job. Through libhvd's C ABI it measures:
//   - every pair of hosts: an allreduce of --bytes between the two alone (a
//     process set of two; busbw = bytes / time, all of it crossing their
//     link), so a slow link or host shows as slow pairs;
//   - the whole job: allreduce and allgather of --bytes (busbw as in
//     nccl-tests: 2(n-1)/n and (n-1)/n of algbw).
// Rank 0 prints the report and names every pair below --threshold of the
// best pair, and every host all of whose pairs are below it (its link is
// the slow one). Exit code 0 when nothing is below, 1 when something is, 2
// for bad arguments or a failed collective.
//
//   hvd-selftest [--bytes B] [--iterations N] [--threshold F]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/c_api.h"
#include "launcher/self_test_report.h"

namespace {

using hvd::launcher::PairResult;
using hvd::launcher::SelfTestReport;

struct Flags {
  size_t bytes = size_t{16} << 20;
  int iterations = 5;
  double threshold = 0.7;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    char* end = nullptr;
    if (a == "--bytes") {
      f->bytes = std::strtoull(argv[i + 1], &end, 10);
    } else if (a == "--iterations") {
      f->iterations = static_cast<int>(std::strtol(argv[i + 1], &end, 10));
    } else if (a == "--threshold") {
      f->threshold = std::strtod(argv[i + 1], &end);
    } else {
      return false;
    }
    if (end == nullptr || *end != '\0') return false;
  }
  return argc % 2 == 1 && f->bytes >= 4 && f->iterations > 0 &&
         f->threshold > 0 && f->threshold <= 1;
}

DLTensor Tensor(void* data, int64_t* shape, int64_t count, uint8_t code) {
  DLTensor t;
  std::memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = code;
  t.dtype.bits = code == kDLFloat ? 32 : 8;
  t.dtype.lanes = 1;
  shape[0] = count;
  t.shape = shape;
  return t;
}

// Waits for `h`; false (after printing why) if it failed.
bool Done(hvd_handle h, const char* what) {
  if (hvd_wait(h, 600) != HVD_OK) {
    std::fprintf(stderr, "hvd-selftest: %s failed: %s\n", what,
                 hvd_handle_error(h));
    return false;
  }
  hvd_release(h);
  return true;
}

// Seconds per call of `run` (which says whether it succeeded): the median
// of `iterations` after one warm-up. *ok false once one fails.
double MedianSeconds(int iterations, bool* ok,
                     const std::function<bool()>& run) {
  std::vector<double> times;
  for (int i = 0; i <= iterations && *ok; ++i) {
    const auto start = std::chrono::steady_clock::now();
    *ok = run();
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    if (i > 0) times.push_back(took.count());
  }
  return hvd::launcher::Median(times);
}

double TimeAllreduce(std::vector<float>& data, int32_t set, int iterations,
                     bool* ok) {
  return MedianSeconds(iterations, ok, [&] {
    int64_t shape[1];
    DLTensor t = Tensor(data.data(), shape, data.size(), kDLFloat);
    hvd_options o = hvd_default_options();
    o.name = "selftest.allreduce";
    o.process_set_id = set;
    return Done(hvd_allreduce_async(&t, nullptr, &o), "allreduce");
  });
}

double TimeAllgather(std::vector<char>& data, int iterations, bool* ok) {
  return MedianSeconds(iterations, ok, [&] {
    int64_t shape[1];
    DLTensor t = Tensor(data.data(), shape, data.size(), kDLUInt);
    hvd_options o = hvd_default_options();
    o.name = "selftest.allgather";
    hvd_handle h = hvd_allgather_async(&t, &o);
    const bool done = hvd_wait(h, 600) == HVD_OK;
    if (!done) {
      std::fprintf(stderr, "hvd-selftest: allgather failed: %s\n",
                   hvd_handle_error(h));
    }
    DLManagedTensor* out = done ? hvd_handle_output(h, 0) : nullptr;
    if (out != nullptr) out->deleter(out);
    hvd_release(h);
    return done;
  });
}

// Every rank's host name (HVD_HOSTNAME), in rank order, by an allgather of
// fixed-size records.
std::vector<std::string> HostNames(int size, bool* ok) {
  constexpr int kLen = 256;
  std::vector<char> mine(kLen, '\0');
  const char* name = std::getenv("HVD_HOSTNAME");
  std::snprintf(mine.data(), kLen, "%s", name != nullptr ? name : "?");
  int64_t shape[1];
  DLTensor t = Tensor(mine.data(), shape, kLen, kDLUInt);
  hvd_options o = hvd_default_options();
  o.name = "selftest.hostnames";
  hvd_handle h = hvd_allgather_async(&t, &o);
  std::vector<std::string> names;
  *ok = hvd_wait(h, 600) == HVD_OK;
  DLManagedTensor* out = *ok ? hvd_handle_output(h, 0) : nullptr;
  if (out != nullptr) {
    const char* all = static_cast<const char*>(out->dl_tensor.data);
    for (int r = 0; r < size; ++r) names.emplace_back(all + r * kLen);
    out->deleter(out);
  }
  hvd_release(h);
  *ok = *ok && static_cast<int>(names.size()) == size;
  return names;
}

// Pair (i, j) measured by both, alone, while the others wait at a barrier.
std::vector<PairResult> MeasurePairs(int rank, int size, const Flags& f,
                                     bool* ok) {
  std::vector<float> data(f.bytes / sizeof(float), 1.0f);
  std::vector<PairResult> pairs;
  for (int i = 0; i < size && *ok; ++i) {
    for (int j = i + 1; j < size && *ok; ++j) {
      const int32_t members[2] = {i, j};
      const int32_t set = hvd_add_process_set(members, 2);
      if (set < 0) {
        std::fprintf(stderr, "hvd-selftest: process set: %s\n",
                     hvd_last_error());
        *ok = false;
        break;
      }
      double seconds = 0;
      if (rank == i || rank == j) {
        seconds = TimeAllreduce(data, set, f.iterations, ok);
      }
      hvd_options o = hvd_default_options();
      *ok = *ok && Done(hvd_barrier_async(&o), "barrier");
      *ok = *ok && hvd_remove_process_set(set) == HVD_OK;
      pairs.push_back({i, j, seconds > 0 ? f.bytes / seconds : 0});
    }
  }
  return pairs;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) {
    std::fprintf(stderr,
                 "usage: hvd-selftest [--bytes B>=4] [--iterations N>0] "
                 "[--threshold 0<F<=1]\n");
    return 2;
  }
  if (hvd_init() != HVD_OK) {
    std::fprintf(stderr, "hvd-selftest: init failed: %s\n", hvd_last_error());
    return 2;
  }
  const int rank = hvd_rank(), size = hvd_size();
  bool ok = true;
  SelfTestReport report;
  report.hosts = HostNames(size, &ok);
  report.pairs = MeasurePairs(rank, size, f, &ok);
  // Each pair's rate as its lower member measured it, summed into rank 0.
  std::vector<float> rates(report.pairs.size(), 0.0f);
  for (size_t k = 0; k < report.pairs.size(); ++k) {
    if (report.pairs[k].a == rank) rates[k] = report.pairs[k].bytes_per_s;
  }
  if (ok && !rates.empty()) {
    int64_t shape[1];
    DLTensor t = Tensor(rates.data(), shape, rates.size(), kDLFloat);
    hvd_options o = hvd_default_options();
    o.name = "selftest.rates";
    ok = Done(hvd_allreduce_async(&t, nullptr, &o), "gathering the rates");
  }
  for (size_t k = 0; k < report.pairs.size(); ++k) {
    report.pairs[k].bytes_per_s = rates[k];
  }
  std::vector<float> all(f.bytes / sizeof(float), 1.0f);
  std::vector<char> block(f.bytes / size + 1, 1);
  if (ok) report.allreduce_s = TimeAllreduce(all, 0, f.iterations, &ok);
  if (ok) report.allgather_s = TimeAllgather(block, f.iterations, &ok);
  report.bytes = f.bytes;
  report.allgather_bytes = block.size() * size;
  hvd_shutdown();
  if (!ok) return 2;
  if (rank != 0) return 0;
  std::fputs(FormatReport(report, f.threshold).c_str(), stdout);
  return report.AnyBelow(f.threshold) ? 1 : 0;
}
