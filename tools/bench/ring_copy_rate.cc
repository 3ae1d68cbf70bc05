// The rate of copies into a ring that another process reads: what a
// shared-memory sender's copies run at, by the way it copies.
//
//   bazel run -c opt //tools/bench:ring_copy_rate -- [ROUNDS]
//
// A writer and a reader process, bound as hvdrun binds two workers (a core
// each where there are two or more), share a 1 MiB ring in an anonymous shared
// mapping; the writer copies 20,000 pieces of 64 KiB into it (hvd's defaults,
// HVD_SHM_RING_BYTES and HVD_SHM_PIECE_BYTES) and the reader copies each out
// once it is there. For each of the three ways the writer can copy (memcpy,
// which glibc does with `rep movsb` at these sizes; streaming stores; plain
// 16-byte vector stores) it prints, per round, the writer's copy rate and the
// whole transfer's:
//
//   memcpy write 31.2 GB/s total 12.0 GB/s
//
// On an AMD EPYC VM the memcpy and vector lines drop from 10-30 GB/s to 2-4
// in some placements of its vCPUs on the host, which come and go every few
// seconds, while the streamed one stays (docs/performance.md, "Two
// placements of the host").
#include <emmintrin.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/common/streaming_copy.h"
#include "tools/bench/worker_binding.h"

namespace {

constexpr size_t kRing = size_t{1} << 20;
constexpr size_t kPiece = size_t{64} << 10;
constexpr int kPieces = 20000;

using Clock = std::chrono::steady_clock;

// Plain 16-byte vector stores (n is a multiple of 16 here).
void VectorCopy(char* to, const char* from, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(to + i),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
  }
}

struct Cursors {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
};

// The reader: copies each piece out once it is there.
void Read(Cursors* cursors, const char* ring) {
  std::vector<char> out(kPiece);
  for (uint64_t t = 0; t < uint64_t{kPieces} * kPiece; t += kPiece) {
    while (cursors->head.load(std::memory_order_acquire) - t < kPiece) {
    }
    std::memcpy(out.data(), ring + t % kRing, kPiece);
    cursors->tail.store(t + kPiece, std::memory_order_release);
  }
}

// The writer: copies kPieces pieces in `way` as the ring has room; prints
// its rates.
void Write(const char* name, int way, Cursors* cursors, char* ring) {
  std::vector<char> piece(kPiece, 3);
  Clock::duration copying{};
  const Clock::time_point start = Clock::now();
  for (uint64_t h = 0; h < uint64_t{kPieces} * kPiece; h += kPiece) {
    while (h + kPiece - cursors->tail.load(std::memory_order_acquire) > kRing) {
    }
    char* to = ring + h % kRing;
    const Clock::time_point a = Clock::now();
    if (way == 0) std::memcpy(to, piece.data(), kPiece);
    if (way == 1) hvd::StreamingCopy(to, piece.data(), kPiece);
    if (way == 2) VectorCopy(to, piece.data(), kPiece);
    copying += Clock::now() - a;
    cursors->head.store(h + kPiece, std::memory_order_release);
  }
  const Clock::duration total = Clock::now() - start;
  const double bytes = static_cast<double>(kPieces) * kPiece;
  auto gbps = [&](Clock::duration d) {
    return bytes / std::chrono::duration<double, std::nano>(d).count();
  };
  std::printf("%-9s write %5.1f GB/s total %5.1f GB/s\n", name, gbps(copying),
              gbps(total));
  std::fflush(stdout);
}

// One transfer copied in `way`: the writer and the reader are children of
// this process, each bound as a worker (a process bound already would pass
// its one CPU on to the next children).
bool Transfer(const char* name, int way) {
  void* m = mmap(nullptr, 4096 + kRing, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  auto* cursors = new (m) Cursors;
  char* ring = static_cast<char*>(m) + 4096;
  pid_t children[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    children[i] = fork();
    if (children[i] == 0) {
      hvd::bench::BindAsAWorker(i, 2);
      if (i == 0) {
        Write(name, way, cursors, ring);
      } else {
        Read(cursors, ring);
      }
      _exit(0);
    }
  }
  if (children[0] < 0 || children[1] < 0) {  // one waits for the other
    for (pid_t child : children) {
      if (child > 0) kill(child, SIGKILL);
    }
  }
  bool ok = true;
  for (pid_t child : children) {
    int status = 0;
    ok = ok && child > 0 && waitpid(child, &status, 0) == child &&
         WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  munmap(m, 4096 + kRing);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: ring_copy_rate [ROUNDS >= 1]\n");
    return 2;
  }
  for (int r = 0; r < rounds; ++r) {
    if (!Transfer("memcpy", 0) || !Transfer("streamed", 1) ||
        !Transfer("vector", 2)) {
      std::perror("ring_copy_rate");
      return 1;
    }
  }
  return 0;
}
