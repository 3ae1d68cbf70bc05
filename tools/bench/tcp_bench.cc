// Ping-pong latency and bidirectional bandwidth of the TCP transport between
// two ranks: two processes (default, over a store in a temporary directory)
// or two threads of one process (--threads).
//
//   bazel run -c opt //tools/bench:tcp_bench -- [--threads]
//       [--iters=20000] [--reps=10] [--mib=64]
//
// Knobs of the transport (HVD_TCP_SPIN_US, HVD_TCP_LAZY_RECV_BYTES,
// HVD_TCP_SOCKET_BUFFER_BYTES) are read from the environment as hvd_init
// reads them (the runtime's Config).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "core/rendezvous/store.h"
#include "core/runtime/config.h"
#include "core/transport/tcp/tcp_context.h"

namespace hvd::transport {
namespace {

using Clock = std::chrono::steady_clock;

// A Store over files in one directory, for the two-process mode.
class FileStore : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    const std::string path = Path(key);
    {
      std::ofstream out(path + ".tmp", std::ios::binary);
      out << value;
    }
    std::filesystem::rename(path + ".tmp", path);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    const std::string path = Path(key);
    while (!std::filesystem::exists(path)) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("key ", key));
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  absl::Status Barrier(absl::string_view, int, absl::Duration) override {
    return absl::UnimplementedError("FileStore::Barrier");
  }

 private:
  std::string Path(absl::string_view key) const {
    return absl::StrCat(dir_, "/", absl::StrReplaceAll(key, {{"/", "_"}}));
  }
  std::string dir_;
};

struct Flags {
  bool threads = false;
  int iters = 20000;
  int reps = 10;
  size_t mib = 64;
};

absl::Time Deadline() { return absl::Now() + absl::Seconds(60); }

void Check(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "tcp_bench: %s\n", status.ToString().c_str());
    std::exit(1);
  }
}

// Microseconds of each of `iters` calls of `step`, sorted, after
// max(iters / 10, 100) untimed warm-up calls.
template <typename Step>
std::vector<double> TimedSteps(int iters, Step step) {
  std::vector<double> us;
  us.reserve(iters);
  const int warmup = std::max(iters / 10, 100);
  for (int i = 0; i < warmup + iters; ++i) {
    const auto start = Clock::now();
    step();
    if (i >= warmup) {
      us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - start)
              .count());
    }
  }
  std::sort(us.begin(), us.end());
  return us;
}

// Round trips of `len`-byte messages; rank 0 reports the percentiles.
void PingPong(Context& c, size_t len, int iters) {
  std::string buf(len, 'p');
  const int peer = 1 - c.rank();
  const std::vector<double> us = TimedSteps(iters, [&] {
    if (c.rank() == 0) {
      Check(c.Send(peer, buf.data(), len)->Wait(Deadline()));
      Check(c.Recv(peer, buf.data(), len)->Wait(Deadline()));
    } else {
      Check(c.Recv(peer, buf.data(), len)->Wait(Deadline()));
      Check(c.Send(peer, buf.data(), len)->Wait(Deadline()));
    }
  });
  if (c.rank() != 0) return;
  double sum = 0;
  for (double u : us) sum += u;
  std::printf(
      "ping-pong %8zu B: round trip median %7.1f us  p90 %7.1f us  "
      "p99 %7.1f us  mean %7.1f us\n",
      len, us[us.size() / 2], us[us.size() * 9 / 10], us[us.size() * 99 / 100],
      sum / us.size());
}

// Both ranks send `len` bytes to each other at once and wait for both: the
// data step of a 2-rank allreduce.
void Exchange(Context& c, size_t len, int iters) {
  std::string out(len, 'o'), in(len, 'i');
  const int peer = 1 - c.rank();
  const std::vector<double> us = TimedSteps(iters, [&] {
    auto recv = c.Recv(peer, in.data(), len);
    Check(c.Send(peer, out.data(), len)->Wait(Deadline()));
    Check(recv->Wait(Deadline()));
  });
  if (c.rank() != 0) return;
  std::printf("exchange  %8zu B: both ways     median %7.1f us  p90 %7.1f us\n",
              len, us[us.size() / 2], us[us.size() * 9 / 10]);
}

// Each rank sends `len` bytes to the other while receiving as many.
void Bidirectional(Context& c, size_t len, int reps) {
  std::string out(len, 'o'), in(len, 'i');
  const int peer = 1 - c.rank();
  std::vector<double> gbps;
  for (int i = 0; i < reps + 1; ++i) {
    const auto start = Clock::now();
    auto recv = c.Recv(peer, in.data(), len);
    auto send = c.Send(peer, out.data(), len);
    Check(recv->Wait(Deadline()));
    Check(send->Wait(Deadline()));
    const double s =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (i > 0) gbps.push_back(len / s / 1e9);  // the first one warms up
  }
  if (c.rank() != 0) return;
  std::sort(gbps.begin(), gbps.end());
  std::printf(
      "bidirectional %zu MiB: per direction median %.2f GB/s  "
      "(min %.2f, max %.2f) over %d reps\n",
      len >> 20, gbps[gbps.size() / 2], gbps.front(), gbps.back(), reps);
}

void RunRank(int rank, const std::shared_ptr<Store>& store,
             const Flags& flags) {
  absl::StatusOr<hvd::runtime::Config> config = hvd::runtime::ConfigFromEnv();
  Check(config.status());
  TcpOptions options;
  options.hostname = "bench";
  options.token = "bench-token";
  options.tuning = config->tcp;
  auto context = CreateTcpContext(rank, 2, store, options);
  Check(context.status());
  Context& c = **context;
  for (size_t len : {size_t{8}, size_t{4096}, size_t{65536}}) {
    PingPong(c, len, len > 4096 ? flags.iters / 10 : flags.iters);
  }
  Exchange(c, 4096, flags.iters);
  Bidirectional(c, flags.mib << 20, flags.reps);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--threads") {
      flags.threads = true;
    } else if (absl::ConsumePrefix(&arg, "--iters=")) {
      if (!absl::SimpleAtoi(arg, &flags.iters)) std::exit(2);
    } else if (absl::ConsumePrefix(&arg, "--reps=")) {
      if (!absl::SimpleAtoi(arg, &flags.reps)) std::exit(2);
    } else if (absl::ConsumePrefix(&arg, "--mib=")) {
      if (!absl::SimpleAtoi(arg, &flags.mib)) std::exit(2);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      std::exit(2);
    }
  }
  return flags;
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  std::printf("tcp_bench: 2 %s, %u cores\n",
              flags.threads ? "threads" : "processes",
              std::thread::hardware_concurrency());
  std::fflush(stdout);
  if (flags.threads) {
    std::shared_ptr<Store> store = NewInMemoryStore();
    std::thread peer([&] { RunRank(1, store, flags); });
    RunRank(0, store, flags);
    peer.join();
    return 0;
  }
  char dir_template[] = "/tmp/tcp_bench.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  auto store = std::make_shared<FileStore>(dir);
  const pid_t child = fork();
  if (child == 0) {
    RunRank(1, store, flags);
    std::fflush(stdout);
    _exit(0);
  }
  RunRank(0, store, flags);
  int status = 0;
  waitpid(child, &status, 0);
  std::filesystem::remove_all(dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace
}  // namespace hvd::transport

int main(int argc, char** argv) { return hvd::transport::Main(argc, argv); }
