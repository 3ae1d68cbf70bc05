// Rank 0's CPU for one negotiation cycle as the job grows, with every
// tensor negotiated by response-cache bit (a training step after the
// first): parse each peer's request list, decide (Coordinator::Compute),
// serialize the answer. The transport's per-message cost comes on top;
// docs/performance_scale.md sets these figures into its model.
//
//   bazel-bin/tools/bench/negotiation_cost [--tensors 161] [--full 0|1]
//       [--ranks 2,64,1024,4096,16384]
//
// Prints, per job size, the microseconds per cycle and per rank.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/runtime/coordinator.h"

namespace hvd::runtime {
namespace {

using Clock = std::chrono::steady_clock;

Request Cached(int index) {
  Request r;
  r.set_type(ALLREDUCE);
  r.set_name(absl::StrCat("grad.", index));
  r.set_dtype(8);  // float32
  r.add_shape(1024);
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  return r;
}

// Median microseconds of one cycle at `size` ranks, `tensors` cached (or,
// with `full`, requested in full: a step the cache does not know yet).
double CycleMicros(int size, int tensors, bool full) {
  ProcessSetTable sets(size);
  ResponseCache cache(std::max(tensors, 1));
  Timeline timeline;
  CoordinatorOptions options;
  options.size = size;
  options.stall_check_time = absl::ZeroDuration();
  Coordinator coordinator(options, &sets, &cache, &timeline);
  std::string bits;
  for (int t = 0; t < tensors; ++t) {
    cache.Put(Cached(t));
    SetBit(bits, cache.Lookup(Cached(t)));
  }
  RequestList mine;
  if (full) {
    for (int t = 0; t < tensors; ++t) *mine.add_requests() = Cached(t);
  } else {
    mine.set_cache_bits(bits);
  }
  const std::string wire = mine.SerializeAsString();
  std::vector<RequestList> lists(size);
  const int cycles = std::max(5, (full ? 20000 : 200000) / size);
  std::vector<double> samples;
  for (int c = 0; c < cycles; ++c) {
    const auto t0 = Clock::now();
    for (int r = 0; r < size; ++r) {
      lists[r].ParseFromString(wire);
      for (Request& q : *lists[r].mutable_requests()) q.set_rank(r);
    }
    const ResponseList out = coordinator.Compute(lists, absl::Now());
    const std::string reply = out.SerializeAsString();
    const auto t1 = Clock::now();
    if (out.responses_size() == 0 || reply.empty()) {
      std::fprintf(stderr, "negotiation_cost: nothing was ready\n");
      std::exit(1);
    }
    samples.push_back(
        std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace
}  // namespace hvd::runtime

int main(int argc, char** argv) {
  int tensors = 161;
  bool full = false;
  std::vector<int> ranks = {2, 64, 1024, 4096, 16384};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--full") == 0) {
      full = std::atoi(argv[i + 1]) != 0;
    } else if (std::strcmp(argv[i], "--tensors") == 0) {
      tensors = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--ranks") == 0) {
      ranks.clear();
      for (auto part : absl::StrSplit(argv[i + 1], ',')) {
        int n;
        if (absl::SimpleAtoi(part, &n) && n >= 1) ranks.push_back(n);
      }
    } else {
      std::fprintf(stderr, "negotiation_cost: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("# rank 0's negotiation cycle, %d tensors %s\n", tensors,
              full ? "requested in full" : "by cache bit");
  std::printf("%8s %14s %14s\n", "ranks", "us/cycle", "us/rank");
  for (int n : ranks) {
    const double us = hvd::runtime::CycleMicros(n, tensors, full);
    std::printf("%8d %14.1f %14.3f\n", n, us, us / n);
  }
  return 0;
}
