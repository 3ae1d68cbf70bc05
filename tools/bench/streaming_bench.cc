// Streaming stores in a large allreduce, measured in one process: 2 ranks
// (threads, each bound to a CPU of its own when there are two) over the
// shared-memory transport, float32 Sum ring allreduces of BYTES, in place
// and out of place, alternating call by call between the last step
// received past the caches (streaming_store_bytes = BYTES) and not (0), so
// that the machine's swings hit both alike.
//
//   bazel build -c opt //tools/bench:streaming_bench
//   bazel-bin/tools/bench/streaming_bench [BYTES [CALLS]]
//
// Prints per mode the median busbw (GB/s) of each setting and their ratio.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/collectives/test_mesh.h"
#include "host/cpu_binding.h"

namespace hvd::collectives {
namespace {

using Clock = std::chrono::steady_clock;

// Binds the calling thread to the index-th CPU this process may use, when
// there are two or more.
void BindTo(int index) {
  const std::vector<int> cpus = host::AllowedCpus();
  if (cpus.size() < 2) return;
  absl::StatusOr<cpu_set_t> set = host::CpuSetOf({cpus[index]});
  if (set.ok()) pthread_setaffinity_np(pthread_self(), sizeof(*set), &*set);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  const size_t bytes =
      argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64 << 20;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 40;
  if (bytes < 1024 || calls < 2) {
    std::fprintf(stderr,
                 "usage: streaming_bench [BYTES [CALLS]]: BYTES >= 1024, "
                 "CALLS >= 2\n");
    return 2;
  }
  auto mesh = TestMesh::Create(2, MeshTransport::kShm);
  if (!mesh.ok()) {
    std::fprintf(stderr, "streaming_bench: %s\n",
                 mesh.status().ToString().c_str());
    return 1;
  }
  const size_t count = bytes / sizeof(float);
  // [out of place][streamed]: seconds of rank 0's calls.
  std::vector<double> seconds[2][2];
  auto statuses = (*mesh)->RunAll([&](int rank, transport::Context& context) {
    BindTo(rank);
    std::vector<float> input(count, 1.0f), output(count, 0.0f);
    CollectiveOptions options;
    for (int i = 0; i < 4 * calls; ++i) {
      const bool streamed = i % 2, out_of_place = (i / 2) % 2;
      options.streaming_store_bytes = streamed ? bytes : 0;
      std::vector<AllreducePiece> piece = {
          {input.data(), out_of_place ? output.data() : input.data(), count}};
      const auto t0 = Clock::now();
      absl::Status s =
          AllreduceMany(context, Group::All(context), piece, DataType::kFloat32,
                        ReduceOp::kSum, options);
      if (!s.ok()) return s;
      const double dt =
          std::chrono::duration<double>(Clock::now() - t0).count();
      if (rank == 0 && i >= 4) seconds[out_of_place][streamed].push_back(dt);
      // Keep the values finite: a Sum doubles them every call.
      if (!out_of_place) std::fill(input.begin(), input.end(), 1.0f);
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) {
    if (!s.ok()) {
      std::fprintf(stderr, "streaming_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("%-12s %10s %10s %8s  (%zu bytes, %d calls each, busbw GB/s)\n",
              "mode", "plain", "streamed", "ratio", bytes, calls - 1);
  for (int oop = 0; oop < 2; ++oop) {
    const double plain = bytes / Median(seconds[oop][0]) / 1e9;
    const double streamed = bytes / Median(seconds[oop][1]) / 1e9;
    std::printf("%-12s %10.3f %10.3f %8.3f\n",
                oop ? "out of place" : "in place", plain, streamed,
                streamed / plain);
  }
  return 0;
}

}  // namespace
}  // namespace hvd::collectives

int main(int argc, char** argv) { return hvd::collectives::Main(argc, argv); }
