#include "core/transport/shm/shm_context.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/transport/contract_checks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

std::string Pattern(size_t len, int seed) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) {
    s[i] = static_cast<char>((i * 131 + seed * 7) >> 3);
  }
  return s;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Names in /dev/shm made by this process.
std::vector<std::string> OurSegments() {
  std::vector<std::string> names;
  const std::string prefix = absl::StrCat("hvd-", getpid(), "-");
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (absl::StartsWith(e->d_name, prefix)) names.push_back(e->d_name);
    }
    closedir(dir);
  }
  return names;
}

class ShmContextTest : public ::testing::Test {
 protected:
  // Ranks `local` of a size-`size` job, one thread each.
  std::vector<ShmMesh> Connect(int size, const std::vector<int>& local,
                               const ShmOptions& options = {}) {
    std::vector<absl::StatusOr<ShmMesh>> results(local.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < local.size(); ++i) {
      threads.emplace_back([&, i] {
        results[i] =
            CreateShmContext(local[i], size, local, store_.get(), options);
      });
    }
    for (auto& t : threads) t.join();
    std::vector<ShmMesh> meshes;
    for (auto& r : results) {
      EXPECT_TRUE(r.ok()) << r.status();
      meshes.push_back(r.ok() ? *std::move(r) : ShmMesh{});
    }
    return meshes;
  }

  std::vector<std::unique_ptr<Context>> ConnectAll(
      int size, const ShmOptions& options = {}) {
    std::vector<std::unique_ptr<Context>> contexts;
    for (ShmMesh& m : Connect(size, Iota(size), options)) {
      contexts.push_back(std::move(m.context));
    }
    return contexts;
  }

  std::unique_ptr<Store> store_ = NewInMemoryStore();
};

TEST_F(ShmContextTest, ConnectsEveryLocalPeerAndLeavesNoNameBehind) {
  std::vector<ShmMesh> meshes = Connect(3, {0, 1, 2});
  ASSERT_EQ(meshes.size(), 3u);
  EXPECT_THAT(meshes[0].peers, ElementsAre(1, 2));
  EXPECT_THAT(meshes[1].peers, ElementsAre(0, 2));
  EXPECT_EQ(meshes[2].context->rank(), 2);
  EXPECT_EQ(meshes[2].context->size(), 3);
  EXPECT_THAT(meshes[2].context->PeerAddress(0), StartsWith("shm:pid"));
  EXPECT_THAT(OurSegments(), ::testing::IsEmpty());
}

TEST_F(ShmContextTest, MessagesOfEverySizeArriveIntact) {
  auto contexts = ConnectAll(2);
  // Around the slot size, the ring size (1 MiB) and beyond it.
  for (size_t len : {size_t{0}, size_t{1}, size_t{63}, size_t{64},
                     size_t{65}, size_t{4096}, (size_t{1} << 20) - 64,
                     (size_t{1} << 20) + 1, size_t{5} << 20}) {
    // Each rank on its own thread: a context moves only its own bytes.
    auto exchange = [&](int me) {
      const std::string out = Pattern(len, me);
      std::string in(len, 'x');
      auto s = contexts[me]->Send(1 - me, out.data(), len);
      auto r = contexts[me]->Recv(1 - me, in.data(), len);
      ASSERT_TRUE(r->Wait(Deadline()).ok()) << len;
      ASSERT_TRUE(s->Wait(Deadline()).ok()) << len;
      EXPECT_TRUE(in == Pattern(len, 1 - me)) << "length " << len;
    };
    std::thread t([&] { exchange(1); });
    exchange(0);
    t.join();
  }
}

TEST_F(ShmContextTest, SendsStreamedIntoTheRingArriveIntactAtAnyAlignment) {
  // A rate no plain copy reaches: after two timed copies of 16 KiB or more
  // every sender streams its pieces, with a plain one every 32nd.
  ShmOptions options;
  options.tuning.slow_copy_mbps = SIZE_MAX / 4000;
  auto contexts = ConnectAll(2, options);
  for (size_t len : {size_t{16} << 10, (size_t{64} << 10) + 5,
                     (size_t{1} << 20) + 17, size_t{5} << 20}) {
    for (size_t at : {0, 3}) {
      auto exchange = [&](int me) {
        const std::string out = Pattern(at + len, me);
        std::string in(len, 'x');
        auto s = contexts[me]->Send(1 - me, out.data() + at, len);
        auto r = contexts[me]->Recv(1 - me, in.data(), len);
        ASSERT_TRUE(r->Wait(Deadline()).ok()) << len;
        ASSERT_TRUE(s->Wait(Deadline()).ok()) << len;
        EXPECT_TRUE(in == Pattern(at + len, 1 - me).substr(at))
            << len << " from " << at;
      };
      std::thread t([&] { exchange(1); });
      exchange(0);
      t.join();
    }
  }
}

TEST_F(ShmContextTest, StreamedReceivesArriveIntactAtAnyAlignment) {
  auto contexts = ConnectAll(2);
  for (size_t len : {size_t{1}, size_t{100}, size_t{4096} + 3,
                     (size_t{1} << 20) + 17, size_t{3} << 20}) {
    for (size_t at : {0, 1, 8, 13}) {
      const std::string out = Pattern(len, 0);
      std::string in(at + len + 64, 'x');
      std::thread sender([&] {
        auto s = contexts[0]->Send(1, out.data(), len);
        EXPECT_TRUE(s->Wait(Deadline()).ok()) << len;
      });
      auto r = contexts[1]->RecvStreaming(0, in.data() + at, len);
      ASSERT_TRUE(r->Wait(Deadline()).ok()) << len;
      sender.join();
      EXPECT_TRUE(in.compare(at, len, out) == 0) << len << " at " << at;
      EXPECT_EQ(in.find_first_not_of('x', at + len), std::string::npos)
          << "written past the end: " << len << " at " << at;
      EXPECT_EQ(in.find_first_not_of('x'), at) << len << " at " << at;
    }
  }
}

TEST_F(ShmContextTest, ReducedReceivesComeStraightOutOfTheRingInWholePieces) {
  auto contexts = ConnectAll(2);
  EXPECT_TRUE(contexts[1]->ReducesOnReceive(0));
  testing::ExpectRecvReduceHandsOverTheMessageOrSaysItCannot(
      *contexts[0], *contexts[1], Deadline());
}

TEST_F(ShmContextTest, AReducedReceiveOfAnotherLengthFailsAsARecvDoes) {
  auto contexts = ConnectAll(2);
  const std::string big(100, 'a');
  auto s = contexts[0]->Send(1, big.data(), big.size());
  size_t handed = 0;
  auto r = contexts[1]->RecvReduce(
      0, 50, [&](size_t, const char*, size_t bytes) { handed += bytes; });
  const absl::Status status = r->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(),
            "rank 1: message from rank 0 (shared memory) is 100 bytes but the "
            "receive posted for it expects 50 bytes");
  EXPECT_EQ(handed, 0u);
  EXPECT_EQ(contexts[1]->status(), status);
}

TEST_F(ShmContextTest, ManyMessagesKeepTheirOrderBothWays) {
  auto contexts = ConnectAll(2);
  constexpr int kCount = 300;
  auto run = [&](int me) {
    Context& c = *contexts[me];
    const int peer = 1 - me;
    std::vector<std::string> out, in(kCount);
    std::vector<std::unique_ptr<Request>> requests;
    for (int i = 0; i < kCount; ++i) out.push_back(Pattern(i * 997 % 70000, i));
    for (int i = 0; i < kCount; ++i) {
      requests.push_back(c.Send(peer, out[i].data(), out[i].size()));
      in[i].resize(i * 997 % 70000);
      requests.push_back(c.Recv(peer, in[i].data(), in[i].size()));
    }
    for (auto& r : requests) ASSERT_TRUE(r->Wait(Deadline()).ok());
    for (int i = 0; i < kCount; ++i) {
      ASSERT_TRUE(in[i] == Pattern(i * 997 % 70000, i)) << "message " << i;
    }
  };
  std::thread t([&] { run(1); });
  run(0);
  t.join();
}

TEST_F(ShmContextTest, RecvAnyTakesTheSenderLength) {
  auto contexts = ConnectAll(2);
  const std::string msg = Pattern(3000001, 5);
  std::string got = "old contents";
  std::thread sender([&] {
    EXPECT_TRUE(contexts[0]->Send(1, msg.data(), msg.size())
                    ->Wait(Deadline())
                    .ok());
  });
  EXPECT_TRUE(contexts[1]->RecvAny(0, &got)->Wait(Deadline()).ok());
  sender.join();
  EXPECT_TRUE(got == msg);
  EXPECT_TRUE(contexts[1]->Send(0, nullptr, 0)->Wait(Deadline()).ok());
  EXPECT_TRUE(contexts[0]->RecvAny(1, &got)->Wait(Deadline()).ok());
  EXPECT_EQ(got, "");
}

TEST_F(ShmContextTest, AnOversizedControlMessageFailsRecvAnyUnreserved) {
  auto contexts = ConnectAll(2);
  testing::ExpectOversizedRecvAnyFails(*contexts[0], *contexts[1], Deadline());
}

TEST_F(ShmContextTest, AWaitPastItsDeadlineCanBeWaitedForAgain) {
  auto contexts = ConnectAll(2);
  testing::ExpectAWaitPastItsDeadlineCanBeWaitedForAgain(
      *contexts[0], *contexts[1], Deadline());
}

TEST_F(ShmContextTest, EachThreadTalksToItsOwnPeerConcurrently) {
  auto contexts = ConnectAll(4);
  // Rank 0 exchanges with 1, 2 and 3 from three threads at once; each peer
  // echoes on a thread of its own.
  std::vector<std::thread> threads;
  for (int peer = 1; peer < 4; ++peer) {
    threads.emplace_back([&, peer] {
      const std::string a = Pattern(3 << 20, peer);
      std::string echo(a.size(), '\0');
      auto s = contexts[0]->Send(peer, a.data(), a.size());
      auto r = contexts[0]->Recv(peer, echo.data(), echo.size());
      ASSERT_TRUE(r->Wait(Deadline()).ok());
      ASSERT_TRUE(s->Wait(Deadline()).ok());
      EXPECT_TRUE(echo == a) << "peer " << peer;
    });
    threads.emplace_back([&, peer] {
      std::string got(3 << 20, '\0');
      ASSERT_TRUE(
          contexts[peer]->Recv(0, got.data(), got.size())->Wait(Deadline()).ok());
      ASSERT_TRUE(
          contexts[peer]->Send(0, got.data(), got.size())->Wait(Deadline()).ok());
    });
  }
  for (auto& t : threads) t.join();
}

// Nobody of the sender polls while its message streams through the 1 MiB
// ring (its thread could be waiting on another transport): the helper
// thread keeps refilling the ring as the reader drains it.
TEST_F(ShmContextTest, LargeSendCompletesWhileItsOwnerDoesNotPoll) {
  auto contexts = ConnectAll(2);
  const std::string msg = Pattern(5 << 20, 9);
  auto send = contexts[0]->Send(1, msg.data(), msg.size());
  std::string got(msg.size(), '\0');
  ASSERT_TRUE(
      contexts[1]->Recv(0, got.data(), got.size())->Wait(Deadline()).ok());
  EXPECT_TRUE(got == msg);
  EXPECT_TRUE(send->Wait(Deadline()).ok());
}

// The mirror image: a receive is posted but its owner waits elsewhere; the
// blocked writer has the receiver's helper drain into it.
TEST_F(ShmContextTest, PostedReceiveDrainsWhileItsOwnerDoesNotPoll) {
  auto contexts = ConnectAll(2);
  const std::string msg = Pattern(5 << 20, 4);
  std::string got(msg.size(), '\0');
  auto recv = contexts[1]->Recv(0, got.data(), got.size());
  ASSERT_TRUE(
      contexts[0]->Send(1, msg.data(), msg.size())->Wait(Deadline()).ok());
  EXPECT_TRUE(recv->Wait(Deadline()).ok());
  EXPECT_TRUE(got == msg);
}

TEST_F(ShmContextTest, LengthMismatchFailsReceiverAndThenItsPeer) {
  auto contexts = ConnectAll(2);
  std::string big(100, 'a'), small(50, '\0');
  auto s = contexts[0]->Send(1, big.data(), big.size());
  auto r = contexts[1]->Recv(0, small.data(), small.size());
  absl::Status status = r->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(),
            "rank 1: message from rank 0 (shared memory) is 100 bytes but the "
            "receive posted for it expects 50 bytes");
  EXPECT_EQ(contexts[1]->status(), status);
  // Rank 0 learns it through rank 1's segment.
  std::string x(8, '\0');
  auto r0 = contexts[0]->Recv(1, x.data(), x.size());
  absl::Status peer = r0->Wait(Deadline());
  EXPECT_EQ(peer.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(peer.message()),
              StartsWith("rank 0: rank 1 on this host failed: rank 1: "
                         "message from rank 0"));
}

TEST_F(ShmContextTest, AbortWakesBlockedWaitersHereAndOnPeers) {
  auto contexts = ConnectAll(3);
  std::string buf(16, '\0'), buf2(16, '\0');
  auto here = contexts[0]->Recv(1, buf.data(), buf.size());
  auto there = contexts[2]->Recv(1, buf2.data(), buf2.size());
  absl::Status here_status, there_status;
  std::thread t1([&] { here_status = here->Wait(Deadline()); });
  std::thread t2([&] { there_status = there->Wait(Deadline()); });
  absl::SleepFor(absl::Milliseconds(150));  // let both go to sleep
  contexts[0]->Abort(absl::CancelledError("stop the job"));
  t1.join();
  t2.join();
  EXPECT_EQ(here_status, absl::CancelledError("stop the job"));
  EXPECT_EQ(there_status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(there_status.message(),
            "rank 2: rank 0 on this host failed: stop the job");
  // Later requests fail at once with the first reason.
  auto later = contexts[0]->Send(1, buf.data(), 1);
  EXPECT_EQ(later->Wait(Deadline()), absl::CancelledError("stop the job"));
}

TEST_F(ShmContextTest, DeadlineNamesPeerAndProgressAndKeepsContextUsable) {
  auto contexts = ConnectAll(2);
  std::string buf(32, '\0');
  auto r = contexts[0]->Recv(1, buf.data(), buf.size());
  absl::Status status = r->Wait(absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()),
              ::testing::MatchesRegex("rank 0: Recv from rank 1 \\(shared "
                                      "memory, pid [0-9]+\\) not complete by "
                                      "the deadline: 0 of 32 bytes "
                                      "transferred"));
  EXPECT_FALSE(r->Done());
  auto s = contexts[1]->Send(0, "0123456789abcdef0123456789abcdef", 32);
  EXPECT_TRUE(r->Wait(Deadline()).ok());
  EXPECT_EQ(buf, "0123456789abcdef0123456789abcdef");
}

TEST_F(ShmContextTest, DestroyingContextCancelsItsPendingRequests) {
  auto contexts = ConnectAll(2);
  std::string buf(8, '\0');
  auto r = contexts[0]->Recv(1, buf.data(), buf.size());
  contexts[0].reset();
  absl::Status status = r->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(),
            "rank 0: shared-memory transport context destroyed while a "
            "request to or from rank 1 was pending");
}

TEST_F(ShmContextTest, PeerClosedWhileWeWaitFailsWithUnavailable) {
  auto contexts = ConnectAll(2);
  std::string buf(8, '\0');
  auto r = contexts[0]->Recv(1, buf.data(), buf.size());
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    contexts[1].reset();
  });
  absl::Status status = r->Wait(Deadline());
  closer.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()),
              ::testing::MatchesRegex("rank 0: connection to rank 1 \\(shared "
                                      "memory, pid [0-9]+\\) closed by peer "
                                      "with requests pending"));
}

TEST_F(ShmContextTest, MessageSentBeforePeerClosedCanStillBeRead) {
  auto contexts = ConnectAll(2);
  auto s = contexts[1]->Send(0, "last words", 10);
  ASSERT_TRUE(s->Wait(Deadline()).ok());
  contexts[1].reset();
  std::string got(10, '\0');
  EXPECT_TRUE(contexts[0]->Recv(1, got.data(), 10)->Wait(Deadline()).ok());
  EXPECT_EQ(got, "last words");
}

TEST_F(ShmContextTest, RanksOutsideTheLocalSetAreRefused) {
  std::vector<ShmMesh> meshes = Connect(4, {1, 3});
  ASSERT_EQ(meshes.size(), 2u);
  EXPECT_THAT(meshes[0].peers, ElementsAre(3));
  EXPECT_EQ(meshes[0].context->PeerAddress(2), "");
  absl::Status status = meshes[0].context->Send(2, "x", 1)->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 1: Send to rank 2, which is not connected to this rank "
            "through shared memory (size-4 context)");
}

TEST_F(ShmContextTest, ALoneRankNeedsNoStore) {
  auto mesh = CreateShmContext(0, 1, {0}, nullptr, {});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_TRUE(mesh->peers.empty());
}

TEST_F(ShmContextTest, RejectsLocalRanksWithoutThisRank) {
  auto mesh = CreateShmContext(0, 3, {1, 2}, store_.get(), {});
  EXPECT_EQ(mesh.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mesh.status().message(),
            "CreateShmContext: local ranks [1,2] lack rank 0");
  mesh = CreateShmContext(0, 3, {0, 3}, store_.get(), {});
  EXPECT_EQ(mesh.status().message(),
            "CreateShmContext: local ranks [0,3] repeat a rank or leave the "
            "job of size 3");
}

TEST_F(ShmContextTest, MissingPeerTimesOutNamingIt) {
  ShmOptions options;
  options.connect_timeout = absl::Milliseconds(100);
  auto mesh = CreateShmContext(0, 2, {0, 1}, store_.get(), options);
  EXPECT_EQ(mesh.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(mesh.status().message()),
              StartsWith("rank 0: reading the local peers' shared-memory "
                         "segment names: key 'shm/1' not set within "));
  EXPECT_THAT(OurSegments(), ::testing::IsEmpty());
}

// ---- across processes -------------------------------------------------------

// A store in a directory, for ranks in different processes (test only).
class FileStore : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    const std::string path = Path(key), tmp = path + ".tmp";
    std::ofstream(tmp) << value;
    return rename(tmp.c_str(), path.c_str()) == 0
               ? absl::OkStatus()
               : absl::InternalError("rename");
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      std::ifstream in(Path(key));
      if (in) {
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    return absl::DeadlineExceededError(absl::StrCat("no key ", key));
  }
  absl::Status Barrier(absl::string_view, int, absl::Duration) override {
    return absl::UnimplementedError("Barrier");
  }

 private:
  std::string Path(absl::string_view key) const {
    std::string flat(key);
    for (char& c : flat) {
      if (c == '/') c = '_';
    }
    return absl::StrCat(dir_, "/", flat);
  }
  std::string dir_;
};

TEST(ShmAcrossProcesses, KilledPeerIsNoticedWithinTheLivenessInterval) {
  char dir[] = "/tmp/shm_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FileStore store(dir);
    auto mesh = CreateShmContext(1, 2, {0, 1}, &store, {});
    if (!mesh.ok()) _exit(3);
    const std::string msg = "hello from the child";
    if (!mesh->context->Send(0, msg.data(), msg.size())->Wait(Deadline()).ok())
      _exit(5);
    kill(getpid(), SIGKILL);  // no chance to close anything
    _exit(4);
  }
  FileStore store(dir);
  auto mesh = CreateShmContext(0, 2, {0, 1}, &store, {});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::string got(20, '\0');
  EXPECT_TRUE(mesh->context->Recv(1, got.data(), 20)->Wait(Deadline()).ok());
  EXPECT_EQ(got, "hello from the child");
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wstatus));
  std::string more(4, '\0');
  absl::Status status =
      mesh->context->Recv(1, more.data(), 4)->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 0: rank 1 (pid ", child,
                         " on this host) exited while connected through "
                         "shared memory"));
  EXPECT_EQ(std::system(absl::StrCat("rm -rf ", dir).c_str()), 0);
}

}  // namespace
}  // namespace hvd::transport
