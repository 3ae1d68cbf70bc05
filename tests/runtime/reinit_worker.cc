// A worker for reinit_leak_test: `reinit_worker CYCLES WARMUP` runs CYCLES
// rounds of hvd_init, allreduces, hvd_shutdown in one process, and checks
// that what the process holds between rounds -- threads, file descriptors,
// shared-memory segments, resident memory -- is no more after the last
// round than after round WARMUP. Uses only the C ABI. Prints "rank R: ..."
// lines; exits 0 when every check held.
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/runtime/driver_util.h"

namespace hvd::driver {
namespace {

// What may still grow after the warm-up without a leak. Resident memory:
// malloc keeps freed memory in its per-thread arenas (each round's threads
// are new ones, and may be given an arena not used before), and gRPC fills
// process-wide caches lazily; measured, it levels off after about 100
// rounds, 4-5 MiB above round 5. The heap in use levels off the same way,
// 60-70 KiB above round 5. A leaked transport, fusion buffer or gRPC channel
// per round would pass either bound within a few rounds.
constexpr long kRssSlackKb = 8 * 1024;
constexpr long kHeapSlackKb = 256;

struct Held {
  int threads = 0;
  int fds = 0;
  int shm_names = 0;  // /dev/shm/hvd-<pid>-*, still linked
  int shm_maps = 0;   // mappings of hvd's segments, linked or not
  long rss_kb = 0;
  long heap_kb = 0;   // malloc's bytes in use
};

int CountEntries(const char* dir_path, const std::string& prefix = "") {
  int n = 0;
  if (DIR* dir = opendir(dir_path)) {
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (name.rfind(prefix, 0) == 0) ++n;
    }
    closedir(dir);
  }
  return n;
}

Held Measure() {
  Held held;
  held.threads = CountEntries("/proc/self/task");
  held.fds = CountEntries("/proc/self/fd") - 1;  // less opendir's own
  held.shm_names =
      CountEntries("/dev/shm", "hvd-" + std::to_string(getpid()) + "-");
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/hvd-") != std::string::npos) ++held.shm_maps;
  }
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) held.rss_kb = std::atol(line.c_str() + 6);
  }
  const struct mallinfo2 heap = mallinfo2();
  held.heap_kb = static_cast<long>((heap.uordblks + heap.hblkhd) >> 10);
  return held;
}

// What the process holds once threads that are ending have ended: gRPC
// starts and ends some of its threads on its own (around a channel's
// close), so one may be listed for a moment at either sample. The sample
// with the fewest threads over 200 ms counts; a leaked thread is in all.
Held Settled() {
  Held held = Measure();
  for (int i = 0; i < 10; ++i) {
    usleep(20 * 1000);
    const Held again = Measure();
    if (again.threads < held.threads) held = again;
  }
  return held;
}

std::string Describe(const Held& h) {
  return "threads " + std::to_string(h.threads) + ", fds " +
         std::to_string(h.fds) + ", shm segments " +
         std::to_string(h.shm_names) + ", shm mappings " +
         std::to_string(h.shm_maps) + ", rss " + std::to_string(h.rss_kb) +
         " kB, heap in use " + std::to_string(h.heap_kb) + " kB";
}

std::string WaitAndRelease(hvd_handle handle) {
  const std::string error = Wait(handle);
  hvd_release(handle);
  return error;
}

// One round: a named allreduce large enough for several ring chunks, and an
// unnamed one (each init restarts the generated names on every rank).
void Round(Checker& c, int size, int round) {
  Tensor<float> big({1 << 18}, c.rank + 1.0f), small({7}, 1.0f);
  hvd_options o = hvd_default_options();
  o.name = "reinit.big";
  c.Ok("allreduce big, round " + std::to_string(round),
       WaitAndRelease(hvd_allreduce_async(&big.dl, nullptr, &o)));
  c.Equal("allreduce big", big.data.back(), size * (size + 1) / 2.0f);
  hvd_options unnamed = hvd_default_options();
  c.Ok("allreduce unnamed, round " + std::to_string(round),
       WaitAndRelease(hvd_allreduce_async(&small.dl, nullptr, &unnamed)));
  c.Equal("allreduce unnamed", small.data[0], static_cast<float>(size));
}

void ExpectNoGrowth(Checker& c, const Held& warm, const Held& last) {
  if (last.threads > warm.threads) {
    c.Fail("threads held between rounds: " + std::to_string(last.threads) +
           ", after the warm-up " + std::to_string(warm.threads));
  }
  c.Equal("fds held between rounds", last.fds, warm.fds);
  c.Equal("shm segments left between rounds", last.shm_names, 0);
  c.Equal("shm mappings left between rounds", last.shm_maps, 0);
  if (last.rss_kb > warm.rss_kb + kRssSlackKb) {
    c.Fail("rss grew from " + std::to_string(warm.rss_kb) + " kB to " +
           std::to_string(last.rss_kb) + " kB");
  }
  if (last.heap_kb > warm.heap_kb + kHeapSlackKb) {
    c.Fail("heap in use grew from " + std::to_string(warm.heap_kb) +
           " kB to " + std::to_string(last.heap_kb) + " kB");
  }
}

int Main(int cycles, int warmup) {
  Checker c;
  Held warm;
  bool used_shm = false;
  for (int round = 1; round <= cycles; ++round) {
    if (hvd_init() != HVD_OK) {
      std::printf("rank ?: FAIL init of round %d: %s\n", round,
                  hvd_last_error());
      return 1;
    }
    c.rank = hvd_rank();
    const int size = hvd_size();
    Round(c, size, round);
    used_shm |= Measure().shm_maps > 0;
    hvd_shutdown();
    if (round == warmup) warm = Settled();
    if (c.failures > 0) break;
  }
  const Held last = Settled();
  std::printf("rank %d: after round %d: %s\nrank %d: after round %d: %s\n",
              c.rank, warmup, Describe(warm).c_str(), c.rank, cycles,
              Describe(last).c_str());
  if (!used_shm) c.Fail("the ranks did not use shared memory");
  ExpectNoGrowth(c, warm, last);
  if (c.failures == 0) std::printf("rank %d: PASS\n", c.rank);
  return c.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hvd::driver

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: reinit_worker CYCLES WARMUP\n");
    return 2;
  }
  return hvd::driver::Main(std::atoi(argv[1]), std::atoi(argv[2]));
}
