// The memcpy rate, the anchor of a large allreduce's bus bandwidth: copies
// one buffer of BYTES into another, warm, and prints the median rate.
//
//   bazel run -c opt //tools/bench:memcpy_rate --
//       [--cma] [BYTES [ITERATIONS [PROCESSES]]]
//
// BYTES defaults to 64 MiB (67108864), ITERATIONS to 20, PROCESSES to 1.
// With PROCESSES > 1, that many processes copy at once, each its own
// buffers, every copy started together (a barrier in shared memory before
// each): the rate each gets while the others copy too, which is what each
// rank of a PROCESSES-rank job on one host can move. Each process runs on
// its share of the cores, as hvdrun binds its workers, when there are cores
// enough: left to the scheduler, two copying processes were sometimes put
// on one CPU of a 2-CPU machine and stayed there, each at half the rate.
//
// With --cma, each copy reads another process's buffer through the kernel
// (process_vm_readv, cross-memory attach: the single copy between
// processes that needs no shared memory) instead of memcpy within the
// process: a child of each copier holds the source.
//
// Prints `memcpy BYTES median_us GB/s` (`cma ...` with --cma; GB/s = BYTES
// / median time, the measure hvd_bench's algbw uses), and with PROCESSES >
// 1 ` processes N` after it, the median over every process's copies.
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "absl/strings/numbers.h"
#include "tools/bench/worker_binding.h"

namespace {

// A barrier the processes share: arrivals counted, generation bumped by the
// last to arrive. A process that fails says so, and nobody waits for it.
struct SharedBarrier {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  std::atomic<bool> failed{false};

  // False once some process failed.
  bool Wait(int parties) {
    const int gen = generation.load();
    if (arrived.fetch_add(1) + 1 == parties) {
      arrived.store(0);
      generation.fetch_add(1);
      return !failed.load();
    }
    while (generation.load() == gen && !failed.load()) sched_yield();
    return !failed.load();
  }
};

// The shared page: the barrier, then each process's copy times.
struct Shared {
  SharedBarrier barrier;
  double us[1];  // [processes * iterations]
};

// A child process that holds its own copy of `from` (written after the
// fork, so its pages are its own) until `release` is written.
struct Holder {
  pid_t pid = -1;
  int release = -1;
};

bool StartHolder(std::vector<char>& from, Holder* holder) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  holder->pid = fork();
  if (holder->pid < 0) return false;
  if (holder->pid == 0) {
    close(fds[1]);
    std::memset(from.data(), 1, from.size());
    char byte;
    while (read(fds[0], &byte, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  close(fds[0]);
  holder->release = fds[1];
  return true;
}

// One copy of `from` into `to`: a memcpy, or with a holder a read of the
// holder's copy through the kernel. False if the kernel refused.
bool CopyOnce(std::vector<char>& from, std::vector<char>& to,
              const Holder* holder) {
  if (holder == nullptr) {
    std::memcpy(to.data(), from.data(), from.size());
    return true;
  }
  struct iovec local = {to.data(), to.size()};
  struct iovec remote = {from.data(), from.size()};
  return process_vm_readv(holder->pid, &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(from.size());
}

// Copies `iterations` times, each after the barrier; times go to `us`.
bool Copy(size_t bytes, int iterations, int processes, bool cma, Shared* shared,
          double* us) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  Holder holder;
  if (cma && !StartHolder(from, &holder)) {
    std::perror("memcpy_rate: starting the process that holds the source");
    shared->barrier.failed.store(true);
    return false;
  }
  const Holder* source = cma ? &holder : nullptr;
  bool ok = CopyOnce(from, to, source);  // warm: pages touched
  for (int i = 0; ok && i < iterations; ++i) {
    if (!shared->barrier.Wait(processes)) break;
    const auto start = std::chrono::steady_clock::now();
    ok = CopyOnce(from, to, source);
    us[i] = std::chrono::duration<double, std::micro>(
                std::chrono::steady_clock::now() - start)
                .count();
    // A source that changes between copies, so no copy can be elided.
    from[i % bytes] = static_cast<char>(to[(i * 7) % bytes] + 1);
  }
  if (!ok) {
    std::perror("memcpy_rate: process_vm_readv");
    shared->barrier.failed.store(true);
  }
  if (cma) {
    close(holder.release);
    waitpid(holder.pid, nullptr, 0);
  }
  return ok;
}

bool ParseArgs(int argc, char** argv, bool* cma, size_t* bytes, int* iterations,
               int* processes) {
  int first = 1;
  *cma = argc > 1 && std::strcmp(argv[1], "--cma") == 0;
  if (*cma) ++first;
  const int given = argc - first;
  return given <= 3 &&
         (given < 1 || (absl::SimpleAtoi(argv[first], bytes) && *bytes > 0)) &&
         (given < 2 ||
          (absl::SimpleAtoi(argv[first + 1], iterations) && *iterations > 0)) &&
         (given < 3 || (absl::SimpleAtoi(argv[first + 2], processes) &&
                        *processes > 0 && *processes <= 256));
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;
  int iterations = 20;
  int processes = 1;
  bool cma = false;
  if (!ParseArgs(argc, argv, &cma, &bytes, &iterations, &processes)) {
    std::fprintf(stderr,
                 "usage: memcpy_rate [--cma] [BYTES [ITERATIONS [PROCESSES]]]: "
                 "positive integers (defaults 67108864, 20 and 1; at most "
                 "256 processes)\n");
    return 2;
  }
  const size_t count = size_t(processes) * iterations;
  const size_t shared_bytes = sizeof(Shared) + count * sizeof(double);
  void* page = mmap(nullptr, shared_bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    std::perror("memcpy_rate: mmap");
    return 1;
  }
  Shared* shared = new (page) Shared();
  std::vector<pid_t> children;
  for (int p = 1; p < processes; ++p) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("memcpy_rate: fork");
      for (pid_t child : children) kill(child, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      hvd::bench::BindAsAWorker(p, processes);
      _exit(Copy(bytes, iterations, processes, cma, shared,
                 shared->us + size_t(p) * iterations)
                ? 0
                : 1);
    }
    children.push_back(pid);
  }
  if (processes > 1) hvd::bench::BindAsAWorker(0, processes);
  bool ok = Copy(bytes, iterations, processes, cma, shared, shared->us);
  for (pid_t child : children) {
    int status = 0;
    ok = waitpid(child, &status, 0) == child && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0 && ok;
  }
  if (!ok || shared->barrier.failed.load()) {
    std::fprintf(stderr, "memcpy_rate: a copying process failed\n");
    return 1;
  }
  std::vector<double> us(shared->us, shared->us + count);
  std::sort(us.begin(), us.end());
  const double median = us[us.size() / 2];
  std::printf("%s %zu %.1f %.3f", cma ? "cma" : "memcpy", bytes, median,
              bytes / median / 1e3);
  if (processes > 1) std::printf(" processes %d", processes);
  std::printf("\n");
  return 0;
}
