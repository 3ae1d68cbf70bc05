#include "core/transport/tcp/tcp_context.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/transport/context_contract.h"
#include "core/transport/tcp/address.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport {
namespace {

using testing::Deadline;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing::Pattern;
using testing::RunRanks;
using ::testing::StartsWith;

TcpOptions TestOptions() {
  TcpOptions options;
  options.hostname = "testhost";
  options.token = "job-secret";
  options.connect_timeout = absl::Seconds(20);
  return options;
}

class TcpContextTest : public ::testing::Test {
 protected:
  // One thread per rank; each rank gets its own options from `options_for`.
  std::vector<testing::ContextOrError> TryConnect(
      int size, std::function<TcpOptions(int)> options_for) {
    return testing::TryConnectRanks(size, [&](int rank) {
      return CreateTcpContext(rank, size, store_, options_for(rank));
    });
  }

  std::vector<std::unique_ptr<Context>> Connect(
      int size, const TcpOptions& options = TestOptions()) {
    return testing::ConnectRanks(size, [&](int rank) {
      return CreateTcpContext(rank, size, store_, options);
    });
  }

  std::shared_ptr<Store> store_ = NewInMemoryStore();
};

// The interface's contract (core/transport/context_contract.h) over Tcp.
struct TcpTraits {
  static constexpr char kName[] = "TCP";
  static testing::ContextOrError Create(int rank, int size, Store* store) {
    // The suite's store outlives its contexts.
    return CreateTcpContext(rank, size,
                            std::shared_ptr<Store>(store, [](Store*) {}),
                            TestOptions());
  }
};
}  // namespace

// In the suite's namespace, as gtest requires.
namespace testing {
INSTANTIATE_TYPED_TEST_SUITE_P(Tcp, ContextContractTest, TcpTraits);
}  // namespace testing

namespace {

TEST_F(TcpContextTest, SixtyFourMiBBothDirectionsAtOnce) {
  constexpr size_t kLen = size_t{64} << 20;
  auto contexts = Connect(2);
  RunRanks(contexts, [](Context& c) {
    const int peer = 1 - c.rank();
    const std::string out = Pattern(kLen, c.rank());
    std::string in(kLen, '\0');
    auto recv = c.Recv(peer, in.data(), in.size());
    auto send = c.Send(peer, out.data(), out.size());
    ASSERT_TRUE(recv->Wait(Deadline()).ok());
    ASSERT_TRUE(send->Wait(Deadline()).ok());
    EXPECT_TRUE(in == Pattern(kLen, peer));
  });
}

TEST_F(TcpContextTest, FullMeshOfEightRanksEachSendingToAll) {
  constexpr int kSize = 8;
  auto contexts = Connect(kSize);
  RunRanks(contexts, [](Context& c) {
    std::vector<std::string> out(kSize), in(kSize);
    std::vector<std::unique_ptr<Request>> requests;
    for (int peer = 0; peer < kSize; ++peer) {
      if (peer == c.rank()) continue;
      out[peer] = absl::StrCat("from ", c.rank(), " to ", peer);
      requests.push_back(c.RecvAny(peer, &in[peer]));
      requests.push_back(c.Send(peer, out[peer].data(), out[peer].size()));
    }
    for (auto& r : requests) ASSERT_TRUE(r->Wait(Deadline()).ok());
    for (int peer = 0; peer < kSize; ++peer) {
      if (peer == c.rank()) continue;
      EXPECT_EQ(in[peer], absl::StrCat("from ", peer, " to ", c.rank()));
    }
  });
}

TEST_F(TcpContextTest, AbortReasonReachesAReceiveOfAnyLength) {
  auto contexts = Connect(2);
  contexts[1]->Abort(absl::AbortedError(std::string(5000, 'x')));
  std::string message;
  const absl::Status status =
      contexts[0]->RecvAny(1, &message)->Wait(Deadline());
  const std::string address = contexts[0]->PeerAddress(1);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 0: rank 1 (", address,
                         ") stopped: ", std::string(1024, 'x')));
  EXPECT_TRUE(message.empty());
}

// What arrives as a stop notice's reason may be a corrupt stream's bytes:
// control bytes (terminal escapes) are shown escaped, text as it is.
TEST_F(TcpContextTest, ControlBytesInAStopNoticeArePrintedEscaped) {
  auto contexts = Connect(2);
  contexts[1]->Abort(absl::AbortedError("line\x1b[2J\tend\x7f\n"));
  std::string message;
  const absl::Status status =
      contexts[0]->RecvAny(1, &message)->Wait(Deadline());
  const std::string address = contexts[0]->PeerAddress(1);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 0: rank 1 (", address,
                         ") stopped: line\\x1b[2J\tend\\x7f\n"));
}

// Sends one byte each way between ranks `a` and `b`: connects them.
void Exchange(Context& a, Context& b) {
  char x = 'x', y = 0, z = 0;
  auto ab = a.Send(b.rank(), &x, 1);
  auto ba = b.Send(a.rank(), &x, 1);
  ASSERT_TRUE(b.Recv(a.rank(), &y, 1)->Wait(Deadline()).ok());
  ASSERT_TRUE(a.Recv(b.rank(), &z, 1)->Wait(Deadline()).ok());
  ASSERT_TRUE(ab->Wait(Deadline()).ok());
  ASSERT_TRUE(ba->Wait(Deadline()).ok());
}

// Rank 0 loses rank 2; rank 1, which waits only on rank 0, is told so
// instead of learning merely that rank 0 went away.
TEST_F(TcpContextTest, RankWaitingOnAFailedPeerLearnsWhichRankWasLost) {
  auto contexts = Connect(3);
  Exchange(*contexts[0], *contexts[2]);
  Exchange(*contexts[0], *contexts[1]);
  const std::string address_of_2 = contexts[0]->PeerAddress(2);
  const std::string address_of_0 = contexts[1]->PeerAddress(0);
  char data[16];
  auto from_2 = contexts[0]->Recv(2, data, sizeof(data));
  auto from_0 = contexts[1]->Recv(0, data, sizeof(data));
  contexts[2].reset();
  const std::string lost = absl::StrCat("rank 0: connection to rank 2 (",
                                        address_of_2, ") closed by peer");
  EXPECT_EQ(from_2->Wait(Deadline()).message(), lost);
  EXPECT_EQ(
      from_0->Wait(Deadline()).message(),
      absl::StrCat("rank 1: rank 0 (", address_of_0, ") stopped: ", lost));
}

// A rank connects to a peer when it first posts to it: one that has gone by
// then is reported at once, not at the connect timeout (20 s here).
TEST_F(TcpContextTest, APeerGoneBeforeItWasConnectedFailsTheFirstOpAtOnce) {
  auto contexts = Connect(3);
  contexts[2].reset();
  const absl::Time start = absl::Now();
  char data[16];
  const absl::Status status =
      contexts[0]->Recv(2, data, sizeof(data))->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  // Every address rank 2 published, loopback first on the same host.
  EXPECT_THAT(std::string(status.message()),
              StartsWith("rank 0: rank 2 at 127.0.0.1:"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(" refused the connection: nothing listens there (has "
                        "its process exited?)"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// The lower rank of a pair has the higher one dial it: a message it sends
// before the higher rank has posted anything still arrives, in order.
TEST_F(TcpContextTest, MessagesToAPeerThatHasPostedNothingYetArriveInOrder) {
  auto contexts = Connect(2);
  const std::string first = "first", second(1 << 20, 's');
  auto a = contexts[0]->Send(1, first.data(), first.size());
  auto b = contexts[0]->Send(1, second.data(), second.size());
  absl::SleepFor(absl::Milliseconds(200));
  std::string got1, got2;
  ASSERT_TRUE(contexts[1]->RecvAny(0, &got1)->Wait(Deadline()).ok());
  ASSERT_TRUE(contexts[1]->RecvAny(0, &got2)->Wait(Deadline()).ok());
  EXPECT_EQ(got1, first);
  EXPECT_TRUE(got2 == second);
  EXPECT_TRUE(a->Wait(Deadline()).ok());
  EXPECT_TRUE(b->Wait(Deadline()).ok());
}

// Sockets this process has open (listeners and connections).
int OpenSockets() {
  int n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

// Waits for the count of open sockets to settle at `want` (connections a
// handshake has finished with close a moment later).
int SocketsSettleAt(int want) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int n = OpenSockets();
  while (n != want && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    n = OpenSockets();
  }
  return n;
}

TEST_F(TcpContextTest, ARankConnectsOnlyToThePeersItExchangesMessagesWith) {
  constexpr int kSize = 8;
  const int before = OpenSockets();
  auto contexts = Connect(kSize);
  // A listener each, and no connection yet.
  EXPECT_EQ(SocketsSettleAt(before + kSize), before + kSize);
  // A ring: each rank talks to its two neighbours only; both ends of each
  // of the kSize connections are in this process.
  RunRanks(contexts, [](Context& c) {
    const int next = (c.rank() + 1) % kSize;
    const int prev = (c.rank() + kSize - 1) % kSize;
    const int out = c.rank();
    int in = -1;
    auto recv = c.Recv(prev, &in, sizeof(in));
    ASSERT_TRUE(c.Send(next, &out, sizeof(out))->Wait(Deadline()).ok());
    ASSERT_TRUE(recv->Wait(Deadline()).ok());
    EXPECT_EQ(in, prev);
  });
  EXPECT_EQ(SocketsSettleAt(before + 3 * kSize), before + 3 * kSize);
}

TEST_F(TcpContextTest, AbortMidMessageOnlyClosesTheConnection) {
  auto contexts = Connect(2);
  const size_t len = 64 << 20;  // far more than the socket buffers hold
  std::string out = Pattern(len, 3), in(len, '\0');
  auto send = contexts[1]->Send(0, out.data(), len);
  EXPECT_FALSE(send->Wait(absl::Now() + absl::Milliseconds(50)).ok());
  contexts[1]->Abort(absl::AbortedError("bye"));
  const absl::Status status =
      contexts[0]->Recv(1, in.data(), len)->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  const std::string address = contexts[0]->PeerAddress(1);
  EXPECT_EQ(status.message(), absl::StrCat("rank 0: connection to rank 1 (",
                                           address, ") closed by peer"));
}

TEST_F(TcpContextTest, DestroyingContextWakesAThreadBlockedInWait) {
  auto contexts = Connect(2);
  char data[8];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  absl::Status waited;
  std::thread waiter([&] { waited = recv->Wait(Deadline()); });
  absl::SleepFor(absl::Milliseconds(20));
  contexts[1].reset();
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled);
}

TEST_F(TcpContextTest, LargeReceiveCompletesWithoutAWaiter) {
  constexpr size_t kLen = size_t{64} << 20;  // far beyond the socket buffers
  auto contexts = Connect(2);
  const std::string out = Pattern(kLen, 3);
  std::string in(kLen, '\0');
  auto recv = contexts[1]->Recv(0, in.data(), in.size());
  // Only the io thread of rank 1 can drain the socket while rank 0 waits.
  ASSERT_TRUE(
      contexts[0]->Send(1, out.data(), out.size())->Wait(Deadline()).ok());
  ASSERT_TRUE(recv->Wait(Deadline()).ok());
  EXPECT_TRUE(in == out);
}

TEST_F(TcpContextTest, BlockedWaiterKeepsItsOtherReceivesMoving) {
  constexpr size_t kLen = size_t{64} << 20;
  auto contexts = Connect(3);
  const std::string big = Pattern(kLen, 5);
  absl::Notification big_sent;
  std::thread rank0([&] {
    EXPECT_TRUE(
        contexts[0]->Send(1, big.data(), big.size())->Wait(Deadline()).ok());
    big_sent.Notify();
  });
  std::thread rank2([&] {
    // Stands for a dependency through another channel: rank 2 talks only
    // after rank 0's send is done.
    ASSERT_TRUE(big_sent.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_TRUE(contexts[2]->Send(1, "go", 2)->Wait(Deadline()).ok());
  });
  std::string any;  // a lazily watched receive of a large message
  auto recv_big = contexts[1]->RecvAny(0, &any);
  std::string go;
  EXPECT_TRUE(contexts[1]->RecvAny(2, &go)->Wait(Deadline()).ok());
  EXPECT_TRUE(recv_big->Wait(Deadline()).ok());
  rank0.join();
  rank2.join();
  EXPECT_EQ(go, "go");
  EXPECT_TRUE(any == big);
}

TEST_F(TcpContextTest, WrongTokenIsRefusedWithUnauthenticated) {
  std::vector<std::unique_ptr<Context>> contexts;
  for (auto& result : TryConnect(2, [](int rank) {
         TcpOptions options = TestOptions();
         options.token = rank == 0 ? "right token" : "wrong token";
         return options;
       })) {
    ASSERT_TRUE(result.ok()) << result.status();
    contexts.push_back(*std::move(result));
  }
  // Whichever rank dials, its hello is refused by the other.
  RunRanks(contexts, [](Context& c) {
    char byte = 0;
    const absl::Status status = c.rank() == 1
                                    ? c.Send(0, &byte, 1)->Wait(Deadline())
                                    : c.Recv(1, &byte, 1)->Wait(Deadline());
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
    EXPECT_THAT(std::string(status.message()),
                MatchesRegex(absl::StrCat("rank ", c.rank(), ": peer rank ",
                                          1 - c.rank(),
                                          " at 127\\.0\\.0\\.1:[0-9]+ "
                                          "refused the job token")));
  });
}

TEST_F(TcpContextTest, BindsInterfaceByName) {
  TcpOptions options = TestOptions();
  options.iface = "lo";
  options.hostname = "";  // no same-host shortcut: only the bound address
  auto contexts = Connect(2, options);
  ASSERT_NE(contexts[1], nullptr);
  RunRanks(contexts, [](Context& c) {
    std::string got;
    auto recv = c.RecvAny(1 - c.rank(), &got);
    ASSERT_TRUE(c.Send(1 - c.rank(), "hi", 2)->Wait(Deadline()).ok());
    ASSERT_TRUE(recv->Wait(Deadline()).ok());
    EXPECT_EQ(got, "hi");
  });
}

TEST_F(TcpContextTest, BindsInterfaceByAddress) {
  TcpOptions options = TestOptions();
  options.iface = "127.0.0.1";
  auto contexts = Connect(2, options);
  ASSERT_NE(contexts[0], nullptr);
  EXPECT_EQ(contexts[0]->PeerAddress(1), "not connected");
  Exchange(*contexts[0], *contexts[1]);
  EXPECT_THAT(contexts[0]->PeerAddress(1), StartsWith("127.0.0.1:"));
  EXPECT_THAT(contexts[1]->PeerAddress(0), StartsWith("127.0.0.1:"));
}

TEST_F(TcpContextTest, UnknownInterfaceIsInvalidArgument) {
  TcpOptions options = TestOptions();
  options.iface = "nosuchif0";
  auto context = CreateTcpContext(0, 2, store_, options);
  EXPECT_EQ(context.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(context.status().message()),
              StartsWith("rank 0: network interface 'nosuchif0' is neither an "
                         "IPv4 address nor an up interface with one (up IPv4 "
                         "interfaces: "));
}

TEST_F(TcpContextTest, APeerNobodyListensForFailsNamingRankAndAddress) {
  // A port nobody listens on: bind, then close.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(
      io, boost::asio::ip::tcp::endpoint(
              boost::asio::ip::address_v4::loopback(), 0));
  const int port = probe.local_endpoint().port();
  probe.close();
  // Rank 0's record, as if rank 0 had published it.
  ASSERT_TRUE(store_
                  ->Set("tcp/0",
                        absl::StrCat("hvd-tcp-1\ntesthost\n127.0.0.1:", port))
                  .ok());
  auto context = CreateTcpContext(1, 2, store_, TestOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  char byte = 0;
  const absl::Status status = (*context)->Send(0, &byte, 1)->Wait(Deadline());
  EXPECT_EQ(status, absl::UnavailableError(absl::StrCat(
                        "rank 1: rank 0 at 127.0.0.1:", port,
                        " refused the connection: nothing listens there (has "
                        "its process exited?)")));
  EXPECT_EQ((*context)->status(), status);
}

// A rank reads nothing while its context is created, and looks a peer up
// at its first message to it: a peer that never publishes fails that
// message, naming the peer, at the connect timeout.
TEST_F(TcpContextTest, APeerThatPublishesNoAddressFailsTheFirstMessageToIt) {
  TcpOptions options = TestOptions();
  options.connect_timeout = absl::Milliseconds(300);
  auto context = CreateTcpContext(1, 2, store_, options);
  ASSERT_TRUE(context.ok()) << context.status();
  char byte = 0;
  const absl::Status status = (*context)->Send(0, &byte, 1)->Wait(Deadline());
  EXPECT_EQ(status, absl::DeadlineExceededError(
                        "rank 1: rank 0 published no address to connect to "
                        "within 300ms (has its process started?)"));
  EXPECT_EQ((*context)->status(), status);
}

// Every rank's store reads, counted: a ring reads its neighbours' addresses
// only, not every rank's.
class CountingStore : public Store {
 public:
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return base_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    reads_.fetch_add(1);
    return base_->Get(key, timeout);
  }
  absl::Status Barrier(absl::string_view name, int count,
                       absl::Duration timeout) override {
    return base_->Barrier(name, count, timeout);
  }
  int reads() const { return reads_.load(); }

 private:
  std::unique_ptr<Store> base_ = NewInMemoryStore();
  std::atomic<int> reads_{0};
};

TEST_F(TcpContextTest, ARingReadsOnlyItsNeighboursAddresses) {
  constexpr int kSize = 16;
  auto counting = std::make_shared<CountingStore>();
  store_ = counting;
  auto contexts = Connect(kSize);
  EXPECT_EQ(counting->reads(), 0);
  RunRanks(contexts, [](Context& c) {
    const int next = (c.rank() + 1) % kSize;
    const int prev = (c.rank() + kSize - 1) % kSize;
    int in = -1;
    const int out = c.rank();
    auto recv = c.Recv(prev, &in, sizeof(in));
    ASSERT_TRUE(c.Send(next, &out, sizeof(out))->Wait(Deadline()).ok());
    ASSERT_TRUE(recv->Wait(Deadline()).ok());
  });
  // One read a connection: the dialer's of the lower rank's address (a
  // lower rank asking to be called back reads the higher one's too).
  EXPECT_GE(counting->reads(), kSize);
  EXPECT_LE(counting->reads(), 2 * kSize);
}

}  // namespace
}  // namespace hvd::transport
