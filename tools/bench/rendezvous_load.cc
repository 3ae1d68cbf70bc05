// The rendezvous server under the start-up load of a large job: N simulated
// workers, each a thread with its own connection and the core's own client
// (GrpcStore), do against one server what every rank does at hvd_init:
//
//   Register; Set its layout record (host, transport) and learn every
//   rank's host (the core's own exchange: rank 0 reads the records and
//   publishes the layout once; --layout=every: each rank reads every
//   record, as the core did before); Set its TCP address and learn those
//   of the peers it dials: as the core does (--tcp-peers=lookup: its own
//   record published and its two ring neighbours' looked up together, as a
//   ring's first messages would), by reading each lower rank's
//   (--tcp-peers=lower, the full mesh the core once dialed at init), or its
//   two ring neighbours' with one GetMany (--tcp-peers=ring).
//
// --reads=batched reads each list with one GetMany (what the core does);
// --reads=per-key with one Get per key (what it did before GetMany; implies
// --layout=every). The server runs in a process of its own (this binary,
// re-executed with --serve), so that its CPU time is its own.
//
//   bazel run -c opt //tools/bench:rendezvous_load --
//       [--workers=256,1024,4096] [--reads=batched|per-key]
//       [--layout=gathered|every] [--tcp-peers=lookup|lower|ring]
//       [--value-bytes=48]  (the lower and ring values; lookup publishes
//                            real records of 8 ranks a host)
//
// Prints one row per size: the time until the last worker has its peers
// (from the moment all are connected), the median worker's, the store
// calls each worker made, and the server's CPU time in all and per worker.
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/bootstrap/layout.h"
#include "core/rendezvous/grpc_store.h"
#include "core/rendezvous/rendezvous_server.h"
#include "core/transport/tcp/address.h"
#include "core/transport/tcp/peer_lookup.h"

extern char** environ;

namespace hvd {
namespace {

constexpr char kToken[] = "rendezvous-load-bench";
constexpr absl::Duration kTimeout = absl::Minutes(5);

struct Flags {
  std::vector<int> workers = {256, 1024, 4096};
  bool batched = true;
  enum class TcpPeers { kLookup, kLower, kRing } tcp_peers = TcpPeers::kLookup;
  bool every = false;  // each rank reads every layout record
  int value_bytes = 48;
  int serve = 0;  // > 0: be the server for a job of this size
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--workers=")) {
      flags->workers.clear();
      for (absl::string_view n : absl::StrSplit(a, ',')) {
        int v = 0;
        if (!absl::SimpleAtoi(n, &v) || v < 2) return false;
        flags->workers.push_back(v);
      }
    } else if (a == "--reads=batched" || a == "--reads=per-key") {
      flags->batched = a == "--reads=batched";
    } else if (a == "--layout=every" || a == "--layout=gathered") {
      flags->every = a == "--layout=every";
    } else if (a == "--tcp-peers=lookup") {
      flags->tcp_peers = Flags::TcpPeers::kLookup;
    } else if (a == "--tcp-peers=lower") {
      flags->tcp_peers = Flags::TcpPeers::kLower;
    } else if (a == "--tcp-peers=ring") {
      flags->tcp_peers = Flags::TcpPeers::kRing;
    } else if (absl::ConsumePrefix(&a, "--value-bytes=")) {
      if (!absl::SimpleAtoi(a, &flags->value_bytes)) return false;
    } else if (absl::ConsumePrefix(&a, "--serve=")) {
      if (!absl::SimpleAtoi(a, &flags->serve)) return false;
    } else {
      return false;
    }
  }
  if (!flags->batched) flags->every = true;
  return !flags->workers.empty() && flags->value_bytes > 0;
}

// The server side: prints its port, serves until its stdin closes.
int Serve(int size) {
  RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  options.token = kToken;
  options.size = size;
  RendezvousServer server(options);
  if (absl::Status s = server.Start(); !s.ok()) {
    fprintf(stderr, "rendezvous_load: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  printf("%d\n", server.port());
  fflush(stdout);
  char c;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  server.Shutdown();
  return 0;
}

// A server process for `size` workers: its pid, port, and the pipe whose
// closing ends it.
struct ServerProcess {
  pid_t pid = -1;
  int port = 0;
  int stdin_fd = -1;
};

absl::StatusOr<ServerProcess> SpawnServer(int size) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) return absl::InternalError("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, in[1]);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const std::string serve = absl::StrCat("--serve=", size);
  char exe[] = "/proc/self/exe";
  char* args[] = {exe, const_cast<char*>(serve.c_str()), nullptr};
  ServerProcess server;
  const int rc =
      posix_spawn(&server.pid, exe, &actions, nullptr, args, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  server.stdin_fd = in[1];
  if (rc != 0) return absl::InternalError("cannot start the server process");
  char line[32] = {};
  size_t got = 0;
  while (got < sizeof(line) - 1 && read(out[0], line + got, 1) == 1 &&
         line[got] != '\n') {
    ++got;
  }
  close(out[0]);
  if (!absl::SimpleAtoi(absl::string_view(line, got), &server.port)) {
    return absl::InternalError("the server process printed no port");
  }
  return server;
}

// Ends the server; its CPU time (user + system).
absl::Duration StopServer(const ServerProcess& server) {
  close(server.stdin_fd);
  int status = 0;
  rusage usage{};
  wait4(server.pid, &status, 0, &usage);
  auto seconds = [](const timeval& t) {
    return absl::Seconds(t.tv_sec) + absl::Microseconds(t.tv_usec);
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct WorkerResult {
  absl::Duration took;  // from the start signal to having its peers
  int calls = 0;        // store calls made
  absl::Status status;
};

// Reads keys `prefix`+rank for `ranks`: one GetMany, or one Get each.
absl::Status ReadRanks(Store& store, const std::string& prefix,
                       const std::vector<int>& ranks, bool batched,
                       int* calls) {
  if (batched) {
    ++*calls;
    return GetOfRanks(store, prefix, ranks, kTimeout).status();
  }
  for (int r : ranks) {
    ++*calls;
    absl::StatusOr<std::string> v = store.Get(absl::StrCat(prefix, r), kTimeout);
    if (!v.ok()) return v.status();
  }
  return absl::OkStatus();
}

std::vector<int> Below(int count) {
  std::vector<int> ranks(count);
  for (int r = 0; r < count; ++r) ranks[r] = r;
  return ranks;
}

// Every rank's layout record: as the core does it (rank 0 gathers the
// records and publishes the layout once), or with --layout=every as it did
// before, each rank reading every record.
absl::Status ReadLayout(Store& store, int rank, int size, const Flags& flags,
                        int* calls) {
  if (flags.every) {
    ++*calls;
    if (absl::Status s = store.Set(absl::StrCat("layout/", rank),
                                   absl::StrCat("tcp\nhost", rank / 8));
        !s.ok()) {
      return s;
    }
    return ReadRanks(store, "layout/", Below(size), flags.batched, calls);
  }
  *calls += rank == 0 ? 3 : 2;  // Set; then GetMany and Set, or one Get
  return bootstrap::ExchangeLayout(rank, size,
                                   {absl::StrCat("host", rank / 8), false},
                                   store, kTimeout)
      .status();
}

// The TCP addresses as the core exchanges them (tcp_context.cc,
// peer_lookup.h): a record like a real rank's (8 ranks a host, one address
// and loopback) published, and the two ring neighbours' looked up together,
// as a ring's first messages would.
absl::Status LookUpRingNeighbours(std::shared_ptr<Store> store, int rank,
                                  int size, int* calls) {
  namespace tcp = transport::tcp_internal;
  const unsigned short port = static_cast<unsigned short>(30000 + rank % 8);
  const int host = rank / 8;
  const tcp::PeerRecord mine{
      absl::StrCat("host", host),
      {tcp::Endpoint(tcp::Ipv4(0x0a000000u + static_cast<uint32_t>(host)),
                     port),
       tcp::Endpoint(tcp::Ipv4::loopback(), port)}};
  ++*calls;
  if (absl::Status s = store->Set(absl::StrCat(tcp::kRecordKey, rank),
                                  tcp::EncodePeerRecord(mine));
      !s.ok()) {
    return s;
  }
  const tcp::PeerConnector::Lookup lookup =
      tcp::StoreLookup(std::move(store), mine.hostname);
  ++*calls;
  return lookup({(rank + size - 1) % size, (rank + 1) % size}, kTimeout)
      .status();
}

WorkerResult Work(GrpcStore& store, int rank, int size, const Flags& flags,
                  absl::Time start) {
  WorkerResult result;
  const std::string value(flags.value_bytes, 'a' + rank % 26);
  auto step = [&]() -> absl::Status {
    ++result.calls;
    absl::StatusOr<Registration> r = store.Register(rank, "host", rank, {});
    if (!r.ok()) return r.status();
    if (absl::Status s = ReadLayout(store, rank, size, flags, &result.calls);
        !s.ok()) {
      return s;
    }
    if (flags.tcp_peers == Flags::TcpPeers::kLookup) {
      return LookUpRingNeighbours(
          std::shared_ptr<Store>(&store, [](Store*) {}), rank, size,
          &result.calls);
    }
    ++result.calls;
    if (absl::Status s = store.Set(absl::StrCat("tcp/", rank), value);
        !s.ok()) {
      return s;
    }
    const std::vector<int> peers =
        flags.tcp_peers == Flags::TcpPeers::kRing
            ? std::vector<int>{(rank + size - 1) % size, (rank + 1) % size}
            : Below(rank);
    return ReadRanks(store, "tcp/", peers, flags.batched, &result.calls);
  };
  result.status = step();
  result.took = absl::Now() - start;
  return result;
}

struct Row {
  absl::Duration last, median, server_cpu;
  double calls_per_worker = 0;
};

absl::StatusOr<Row> RunOnce(int size, const Flags& flags) {
  absl::StatusOr<ServerProcess> server = SpawnServer(size);
  if (!server.ok()) return server.status();
  const std::string address = absl::StrCat("127.0.0.1:", server->port);
  std::vector<WorkerResult> results(size);
  absl::BlockingCounter connected(size);
  absl::Notification go;
  absl::Time start;
  std::vector<std::thread> threads;
  std::atomic<int> failed_connects{0};
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      auto store = GrpcStore::Connect(address, kToken, kTimeout);
      if (!store.ok()) ++failed_connects;
      connected.DecrementCount();
      go.WaitForNotification();
      if (!store.ok()) {
        results[rank].status = store.status();
        return;
      }
      results[rank] = Work(**store, rank, size, flags, start);
    });
  }
  connected.Wait();
  start = absl::Now();
  go.Notify();
  for (std::thread& t : threads) t.join();
  Row row;
  row.server_cpu = StopServer(*server);
  std::vector<absl::Duration> took;
  long calls = 0;
  for (const WorkerResult& r : results) {
    if (!r.status.ok()) return r.status;
    took.push_back(r.took);
    calls += r.calls;
  }
  std::sort(took.begin(), took.end());
  row.last = took.back();
  row.median = took[took.size() / 2];
  row.calls_per_worker = static_cast<double>(calls) / size;
  return row;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    fprintf(stderr,
            "usage: rendezvous_load [--workers=N,N,...] "
            "[--reads=batched|per-key] [--layout=gathered|every] "
            "[--tcp-peers=lookup|lower|ring] [--value-bytes=B]\n");
    return 2;
  }
  if (flags.serve > 0) return Serve(flags.serve);
  signal(SIGPIPE, SIG_IGN);
  // As hvd_init does in every rank (see c_api.cc): Debian's abseil keeps
  // its lock-order graph for deadlock detection, one graph per process
  // behind one lock. Real ranks are processes each with their own; the
  // thousands of simulated ones here would otherwise all queue on this
  // process's one (gRPC's client locks nest), a third of the time at 4096.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  printf("reads: %s; layout %s; TCP addresses of %s; values of %d bytes\n",
         flags.batched ? "batched (GetMany)" : "per key (Get)",
         flags.every ? "read by every rank" : "gathered by rank 0",
         flags.tcp_peers == Flags::TcpPeers::kLookup
             ? "the two ring neighbours, looked up together"
         : flags.tcp_peers == Flags::TcpPeers::kRing
             ? "the two ring neighbours, in one GetMany"
             : "every lower rank",
         flags.value_bytes);
  printf("| workers | all have their peers (s) | median worker (s) | store "
         "calls per worker | server CPU (s) | server CPU per worker (ms) |\n");
  printf("|---|---|---|---|---|---|\n");
  for (int size : flags.workers) {
    absl::StatusOr<Row> row = RunOnce(size, flags);
    if (!row.ok()) {
      fprintf(stderr, "rendezvous_load: %d workers: %s\n", size,
              std::string(row.status().message()).c_str());
      return 1;
    }
    printf("| %d | %.2f | %.2f | %.1f | %.2f | %.3f |\n", size,
           absl::ToDoubleSeconds(row->last),
           absl::ToDoubleSeconds(row->median), row->calls_per_worker,
           absl::ToDoubleSeconds(row->server_cpu),
           absl::ToDoubleMilliseconds(row->server_cpu) / size);
    fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace hvd

int main(int argc, char** argv) { return hvd::Main(argc, argv); }
