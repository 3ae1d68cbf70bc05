// Micro-benchmark: ring allreduce of float32 between N ranks (threads of this
// process) over TCP loopback, and the Reduce kernel on one core.
//
//   bazel run -c opt //tools/bench:allreduce_bench -- [--mib=64] [--iters=5] [--chunk_kib=1024] [--ranks=2,4]
//
// Prints per N the best and median time of one allreduce of S bytes and the bus
// bandwidth S/t * 2(N-1)/N (what each link carries), after Reduce's GB/s for
// a Sum (bytes of the destination per second): float32 out of cache, then
// several dtypes on 1 MiB (in cache, like one pipeline chunk).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/collectives/collectives.h"
#include "core/collectives/reduce.h"
#include "core/rendezvous/store.h"
#include "core/transport/tcp/tcp_context.h"

namespace hvd::collectives {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  size_t mib = 64;
  int iters = 5;
  size_t chunk_kib = 1024;
  std::vector<int> ranks = {2, 4};
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv =
        absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() != 2) return false;
    bool ok = true;
    if (kv[0] == "--mib") {
      ok = absl::SimpleAtoi(kv[1], &flags->mib);
    } else if (kv[0] == "--iters") {
      ok = absl::SimpleAtoi(kv[1], &flags->iters);
    } else if (kv[0] == "--chunk_kib") {
      ok = absl::SimpleAtoi(kv[1], &flags->chunk_kib);
    } else if (kv[0] == "--ranks") {
      flags->ranks.clear();
      for (absl::string_view r : absl::StrSplit(kv[1], ',')) {
        int n = 0;
        ok = ok && absl::SimpleAtoi(r, &n) && n > 0;
        flags->ranks.push_back(n);
      }
    } else {
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Runs `iters` timed allreduces (after one warm-up) on `n` ranks; returns
// rank 0's per-iteration times, or an empty vector after printing an error.
std::vector<double> TimeAllreduce(int n, const Flags& flags) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  const size_t count = flags.mib * (size_t{1} << 20) / sizeof(float);
  CollectiveOptions options;
  options.algorithm = AllreduceAlgorithm::kRing;
  options.chunk_bytes = flags.chunk_kib << 10;
  std::vector<double> times;
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      transport::TcpOptions tcp;
      tcp.iface = "127.0.0.1";
      tcp.hostname = "localhost";
      tcp.token = "bench";
      auto context = transport::CreateTcpContext(rank, n, store, tcp);
      if (!context.ok()) {
        statuses[rank] = context.status();
        return;
      }
      const Group group = Group::All(**context);
      std::vector<float> data(count, 1.0f);
      for (int it = 0; it <= flags.iters && statuses[rank].ok(); ++it) {
        const auto start = Clock::now();
        statuses[rank] = Allreduce(**context, group, data.data(), count,
                                   DataType::kFloat32, ReduceOp::kSum, options);
        if (rank == 0 && it > 0) times.push_back(Seconds(Clock::now() - start));
      }
      // Close the contexts only once every rank is done with them.
      store->Barrier("done", n, absl::Minutes(5)).IgnoreError();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < n; ++rank) {
    if (!statuses[rank].ok()) {
      std::fprintf(stderr, "N=%d rank %d: %s\n", n, rank,
                   statuses[rank].ToString().c_str());
      return {};
    }
  }
  return times;
}

void ReportAllreduce(int n, const Flags& flags) {
  const std::vector<double> times = TimeAllreduce(n, flags);
  if (times.empty()) return;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double best = sorted.front();
  const double median = sorted[sorted.size() / 2];
  const double bytes = static_cast<double>(flags.mib) * (1 << 20);
  const double factor = 2.0 * (n - 1) / n;
  std::printf(
      "allreduce ring float32 %zu MiB N=%d chunk=%zu KiB: best %.1f ms "
      "(busbw %.2f GB/s), median %.1f ms (busbw %.2f GB/s)\n",
      flags.mib, n, flags.chunk_kib, best * 1e3, bytes / best * factor / 1e9,
      median * 1e3, bytes / median * factor / 1e9);
}

// Reduce's throughput for a Sum of `bytes` bytes of `dtype`, in bytes of the
// destination per second.
void ReportReduce(DataType dtype, size_t bytes, int reps) {
  const size_t count = bytes / DataTypeSize(dtype);
  std::vector<char> dst(bytes, 0), src(bytes, 0);
  Reduce(dst.data(), src.data(), count, dtype, ReduceOp::kSum);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    Reduce(dst.data(), src.data(), count, dtype, ReduceOp::kSum);
    best = std::min(best, Seconds(Clock::now() - start));
  }
  std::printf("Reduce %s Sum %zu KiB: %.2f GB/s (best of %d)\n",
              std::string(DataTypeName(dtype)).c_str(), bytes >> 10,
              static_cast<double>(bytes) / best / 1e9, reps);
}

}  // namespace
}  // namespace hvd::collectives

int main(int argc, char** argv) {
  hvd::collectives::Flags flags;
  if (!hvd::collectives::ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: %s [--mib=64] [--iters=5] [--chunk_kib=1024] "
                 "[--ranks=2,4]\n",
                 argv[0]);
    return 2;
  }
  using hvd::DataType;
  hvd::collectives::ReportReduce(DataType::kFloat32, size_t{64} << 20, 10);
  for (DataType dtype :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
        DataType::kBFloat16, DataType::kInt32, DataType::kInt8}) {
    hvd::collectives::ReportReduce(dtype, size_t{1} << 20, 200);
  }
  for (int n : flags.ranks) hvd::collectives::ReportAllreduce(n, flags);
  return 0;
}
