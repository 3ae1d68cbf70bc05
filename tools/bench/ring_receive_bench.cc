// How a large ring allreduce receives over shared memory, measured in one
// process: 2 ranks (threads, each bound to a CPU of its own when there are
// two), float32 Sum ring allreduces of BYTES, in place and out of place,
// alternating call by call between two ways of receiving, so that the
// machine's swings hit both alike:
//
// - streaming: the last step received past the caches
//   (streaming_store_bytes = BYTES) or not (0);
// - reduce: reduced chunks combined straight out of the shared-memory ring
//   (Context::RecvReduce) or received into scratch slots and reduced from
//   there (the context behind a wrapper that does not reduce on receive).
//
//   bazel build -c opt //tools/bench:ring_receive_bench
//   bazel-bin/tools/bench/ring_receive_bench streaming|reduce [BYTES [CALLS]]
//
// Prints per mode the median busbw (GB/s) of each way and their ratio.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/collectives/test_mesh.h"
#include "core/transport/forwarding_context.h"
#include "host/cpu_binding.h"
#include "tools/bench/median.h"

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

using ::hvd::bench::Median;

struct Args {
  bool streaming = false;  // Else reduce.
  size_t bytes = size_t{64} << 20;
  int calls = 40;
};

bool Parse(int argc, char** argv, Args* args) {
  if (argc < 2) return false;
  if (std::strcmp(argv[1], "streaming") == 0) {
    args->streaming = true;
  } else if (std::strcmp(argv[1], "reduce") != 0) {
    return false;
  }
  if (argc > 2) args->bytes = std::strtoull(argv[2], nullptr, 10);
  if (argc > 3) args->calls = std::atoi(argv[3]);
  return argc <= 4 && args->bytes >= 1024 && args->calls >= 2;
}

int Main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: ring_receive_bench streaming|reduce [BYTES [CALLS]]:"
                 " BYTES >= 1024, CALLS >= 2\n");
    return 2;
  }
  auto mesh = TestMesh::Create(2, MeshTransport::kShm);
  if (!mesh.ok()) {
    std::fprintf(stderr, "ring_receive_bench: %s\n",
                 mesh.status().ToString().c_str());
    return 1;
  }
  const size_t bytes = args.bytes, count = bytes / sizeof(float);
  // [out of place][the way under test]: seconds of rank 0's calls.
  std::vector<double> seconds[2][2];
  auto statuses = (*mesh)->RunAll([&](int rank, transport::Context& context) {
    BindTo(rank);
    // Passes everything on but RecvReduce: the ring reduces from slots.
    transport::ForwardingContext slots(context);
    std::vector<float> input(count, 1.0f), output(count, 0.0f);
    CollectiveOptions options;
    for (int i = 0; i < 4 * args.calls; ++i) {
      const bool tested = i % 2, out_of_place = (i / 2) % 2;
      transport::Context* used = &context;
      if (args.streaming) {
        options.streaming_store_bytes = tested ? bytes : 0;
      } else if (!tested) {
        used = &slots;
      }
      std::vector<AllreducePiece> piece = {
          {input.data(), out_of_place ? output.data() : input.data(), count}};
      const auto t0 = Clock::now();
      absl::Status s =
          AllreduceMany(*used, Group::All(*used), piece, DataType::kFloat32,
                        ReduceOp::kSum, options);
      if (!s.ok()) return s;
      const double dt =
          std::chrono::duration<double>(Clock::now() - t0).count();
      if (rank == 0 && i >= 4) seconds[out_of_place][tested].push_back(dt);
      // Keep the values finite: a Sum doubles them every call.
      if (!out_of_place) std::fill(input.begin(), input.end(), 1.0f);
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) {
    if (!s.ok()) {
      std::fprintf(stderr, "ring_receive_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const char* before = args.streaming ? "plain" : "slots";
  const char* after = args.streaming ? "streamed" : "from-ring";
  std::printf("%-12s %10s %10s %8s  (%zu bytes, %d calls each, busbw GB/s)\n",
              "mode", before, after, "ratio", bytes, args.calls - 1);
  for (int oop = 0; oop < 2; ++oop) {
    const double base = bytes / Median(seconds[oop][0]) / 1e9;
    const double tested = bytes / Median(seconds[oop][1]) / 1e9;
    std::printf("%-12s %10.3f %10.3f %8.3f\n",
                oop ? "out of place" : "in place", base, tested, tested / base);
  }
  return 0;
}

}  // namespace
}  // namespace hvd::collectives

int main(int argc, char** argv) { return hvd::collectives::Main(argc, argv); }
