// Benchmark: allreduce and allgather busbw over the RDMA transport
// (libfabric, provider --provider, default tcp) against hvd's own TCP
// transport, N ranks as threads of this process on loopback, in one run.
// Also the RDMA context's registration counters (hit rate, fi_mr_reg cost).
//
//   bazel run -c opt //tools/bench:rdma_bench -- [--mib=16] [--iters=5] [--ranks=2,4] [--provider=tcp]
//
// Over the tcp provider this measures the protocol's software cost, not a
// fabric: no RDMA hardware exists where it was written (docs/rdma.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/collectives/collectives.h"
#include "core/rendezvous/store.h"
#include "core/transport/tcp/tcp_context.h"
#include "rdma/rdma_context.h"
#include "tools/bench/median.h"

namespace hvd::collectives {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  size_t mib = 16;
  int iters = 5;
  std::vector<int> ranks = {2, 4};
  std::string provider = "tcp";
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() != 2) return false;
    bool ok = true;
    if (kv[0] == "--mib") {
      ok = absl::SimpleAtoi(kv[1], &f->mib);
    } else if (kv[0] == "--iters") {
      ok = absl::SimpleAtoi(kv[1], &f->iters) && f->iters > 0;
    } else if (kv[0] == "--provider") {
      f->provider = kv[1];
    } else if (kv[0] == "--ranks") {
      f->ranks.clear();
      for (absl::string_view r : absl::StrSplit(kv[1], ',')) {
        int n = 0;
        ok = ok && absl::SimpleAtoi(r, &n) && n > 0;
        f->ranks.push_back(n);
      }
    } else {
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<transport::Context>> Connect(
    bool rdma, int rank, int n, const std::shared_ptr<Store>& store,
    const Flags& flags) {
  if (rdma) {
    rdma::RdmaOptions options;
    options.provider = flags.provider;
    options.token = "bench";
    return rdma::CreateRdmaContext(rank, n, store, options);
  }
  transport::TcpOptions tcp;
  tcp.iface = "127.0.0.1";
  tcp.hostname = "localhost";
  tcp.token = "bench";
  return transport::CreateTcpContext(rank, n, store, tcp);
}

struct Result {
  std::vector<double> allreduce, allgather;  // rank 0's seconds
  rdma::RegistrationStats stats;
  absl::Status status;
};

// One rank: a warm-up and `iters` timed runs of each collective.
absl::Status RunRank(transport::Context& c, const Flags& flags, Result* out) {
  const size_t bytes = flags.mib << 20;
  const Group group = Group::All(c);
  CollectiveOptions options;
  options.algorithm = AllreduceAlgorithm::kRing;
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  const size_t part = bytes / c.size();
  std::vector<char> gathered(part * c.size());
  std::vector<size_t> parts(c.size(), part);
  for (int it = 0; it <= flags.iters; ++it) {
    auto start = Clock::now();
    absl::Status s = Allreduce(c, group, data.data(), data.size(),
                               DataType::kFloat32, ReduceOp::kSum, options);
    if (!s.ok()) return s;
    auto mid = Clock::now();
    s = Allgather(c, group, data.data(), gathered.data(), parts, options);
    if (!s.ok()) return s;
    if (c.rank() == 0 && it > 0) {
      out->allreduce.push_back(std::chrono::duration<double>(mid - start).count());
      out->allgather.push_back(std::chrono::duration<double>(Clock::now() - mid).count());
    }
  }
  if (c.rank() == 0) out->stats = rdma::RdmaRegistrationStats(c);
  return absl::OkStatus();
}

Result Time(bool rdma, int n, const Flags& flags) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  Result result;
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      auto context = Connect(rdma, rank, n, store, flags);
      statuses[rank] = context.ok() ? RunRank(**context, flags, &result)
                                    : context.status();
      store->Barrier("done", n, absl::Minutes(5)).IgnoreError();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& s : statuses) {
    if (!s.ok()) result.status = s;
  }
  return result;
}

using ::hvd::bench::Median;

void Report(bool rdma, int n, const Flags& flags) {
  const Result r = Time(rdma, n, flags);
  const char* name = rdma ? "rdma" : "tcp ";
  if (!r.status.ok()) {
    std::printf("%s N=%d: %s\n", name, n, r.status.ToString().c_str());
    return;
  }
  const double bytes = static_cast<double>(flags.mib << 20);
  const double ar = Median(r.allreduce), ag = Median(r.allgather);
  std::printf(
      "%s N=%d %zu MiB: allreduce median %.1f ms busbw %.2f GB/s | "
      "allgather median %.1f ms busbw %.2f GB/s\n",
      name, n, flags.mib, ar * 1e3, bytes / ar * 2.0 * (n - 1) / n / 1e9,
      ag * 1e3, bytes / ag * (n - 1) / n / 1e9);
  if (rdma) {
    const auto& s = r.stats;
    std::printf(
        "     rank 0 registrations: %llu lookups, %llu hits (%.1f%%), %llu "
        "fi_mr_reg, %.1f us each\n",
        static_cast<unsigned long long>(s.lookups),
        static_cast<unsigned long long>(s.hits),
        s.lookups ? 100.0 * s.hits / s.lookups : 0.0,
        static_cast<unsigned long long>(s.registrations),
        s.registrations ? s.register_seconds / s.registrations * 1e6 : 0.0);
  }
}

}  // namespace
}  // namespace hvd::collectives

int main(int argc, char** argv) {
  hvd::collectives::Flags flags;
  if (!hvd::collectives::ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: %s [--mib=16] [--iters=5] [--ranks=2,4] "
                 "[--provider=tcp]\n",
                 argv[0]);
    return 2;
  }
  for (int n : flags.ranks) {
    hvd::collectives::Report(false, n, flags);
    hvd::collectives::Report(true, n, flags);
  }
  return 0;
}
