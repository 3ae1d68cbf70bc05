#include "core/transport/tcp/peer_connector.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/transport/tcp/handshake.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport::tcp_internal {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using ::testing::HasSubstr;

// One rank: its listener, its connector, the io thread that runs it, and
// what the connector told it.
class Rank final : public PeerConnector::Sink {
 public:
  Rank() : acceptor_(io_, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {}
  ~Rank() override { Stop(); }

  Endpoint endpoint() const { return endpoint_; }

  PeerConnector::Config Config(int rank, int size) const {
    PeerConnector::Config config;
    config.rank = rank;
    config.size = size;
    config.token = "t";
    config.connect_timeout = absl::Seconds(10);
    config.attempt_timeout = absl::Milliseconds(100);
    return config;
  }

  // Builds the connector over `peers` (every peer's endpoint, by rank, as
  // its lookup finds them) and starts its io thread unless `run` is false
  // (Run later).
  void Start(PeerConnector::Config config, std::vector<Endpoint> peers,
             bool run = true) {
    PeerConnector::Lookup lookup = [peers](const std::vector<int>& asked,
                                           absl::Duration)
        -> absl::StatusOr<std::vector<std::vector<Endpoint>>> {
      std::vector<std::vector<Endpoint>> found;
      for (int peer : asked) {
        if (peer >= static_cast<int>(peers.size())) {
          return absl::DeadlineExceededError("not published");
        }
        found.push_back({peers[peer]});
      }
      return found;
    };
    StartLookingUp(std::move(config), std::move(lookup), run);
  }
  // The same with `lookup` as the connector's.
  void StartLookingUp(PeerConnector::Config config,
                      PeerConnector::Lookup lookup, bool run = true) {
    connector_.emplace(io_, std::move(acceptor_), std::move(config),
                       std::move(lookup), this);
    connector_->Start();
    if (run) Run();
  }
  void Run() {
    thread_ = std::thread([this] { io_.run(); });
  }
  void Dial(int peer) { connector_->Dial(peer); }
  void Stop() {
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
    if (connector_) connector_->Close();
  }

  // The connection to `peer` once it is up, or nullopt after `timeout`.
  tcp::socket* AwaitConnection(int peer,
                               absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    const auto ready = [this, peer]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return sockets_.count(peer) > 0;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    auto it = sockets_.find(peer);
    return it == sockets_.end() ? nullptr : &it->second;
  }
  absl::Status AwaitFailure(absl::Duration timeout = absl::Seconds(20)) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&failed_), timeout);
    return failure_;
  }
  int connections() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(sockets_.size()) + extra_;
  }

  void OnConnected(int peer, tcp::socket socket) override {
    absl::MutexLock lock(&mu_);
    if (sockets_.count(peer) > 0) {
      ++extra_;
      return;
    }
    sockets_.emplace(peer, std::move(socket));
  }
  void OnConnectFailed(int, absl::Status status) override {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
    failed_ = true;
  }

 private:
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>>
      work_{io_.get_executor()};
  tcp::acceptor acceptor_;
  const Endpoint endpoint_{acceptor_.local_endpoint()};
  std::optional<PeerConnector> connector_;
  std::thread thread_;
  absl::Mutex mu_;
  std::map<int, tcp::socket> sockets_ ABSL_GUARDED_BY(mu_);
  int extra_ ABSL_GUARDED_BY(mu_) = 0;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

// Starts ranks 0 and 1 of a job of two, with the default test configs.
void StartPair(Rank& r0, Rank& r1) {
  r0.Start(r0.Config(0, 2), {r0.endpoint(), r1.endpoint()});
  r1.Start(r1.Config(1, 2), {r0.endpoint(), r1.endpoint()});
}

void ExpectCarries(tcp::socket& from, tcp::socket& to) {
  asio::write(from, asio::buffer("ping", 4));
  char got[4];
  asio::read(to, asio::buffer(got, 4));
  EXPECT_EQ(std::string(got, 4), "ping");
}

TEST(PeerConnectorTest, TheHigherRankDialsAndBothSidesGetOneConnection) {
  Rank r0, r1;
  StartPair(r0, r1);
  r1.Dial(0);
  tcp::socket* s1 = r1.AwaitConnection(0);
  tcp::socket* s0 = r0.AwaitConnection(1);
  ASSERT_NE(s0, nullptr);
  ASSERT_NE(s1, nullptr);
  ExpectCarries(*s1, *s0);
  EXPECT_EQ(r0.connections(), 1);
  EXPECT_EQ(r1.connections(), 1);
}

TEST(PeerConnectorTest, ALowerRankIsCalledBackByTheHigherOne) {
  Rank r0, r1;
  StartPair(r0, r1);
  r0.Dial(1);
  tcp::socket* s0 = r0.AwaitConnection(1);
  tcp::socket* s1 = r1.AwaitConnection(0);
  ASSERT_NE(s0, nullptr);
  ASSERT_NE(s1, nullptr);
  ExpectCarries(*s0, *s1);
  ExpectCarries(*s1, *s0);
}

TEST(PeerConnectorTest, ALowerRankAsksToBeCalledBackOnlyAfterTheDelay) {
  Rank r0, r1;
  PeerConnector::Config config = r0.Config(0, 2);
  config.callback_delay = absl::Milliseconds(300);
  r0.Start(config, {r0.endpoint(), r1.endpoint()});
  r1.Start(r1.Config(1, 2), {r0.endpoint(), r1.endpoint()});
  const absl::Time start = absl::Now();
  r0.Dial(1);
  ASSERT_NE(r0.AwaitConnection(1), nullptr);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
}

TEST(PeerConnectorTest, BothRanksReachingForEachOtherAtOnceShareOneSocket) {
  for (int round = 0; round < 20; ++round) {
    Rank r0, r1;
    StartPair(r0, r1);
    r0.Dial(1);
    r1.Dial(0);
    tcp::socket* s0 = r0.AwaitConnection(1);
    tcp::socket* s1 = r1.AwaitConnection(0);
    ASSERT_NE(s0, nullptr);
    ASSERT_NE(s1, nullptr);
    ExpectCarries(*s0, *s1);
    absl::SleepFor(absl::Milliseconds(20));  // a second would come by now
    EXPECT_EQ(r0.connections(), 1) << "round " << round;
    EXPECT_EQ(r1.connections(), 1) << "round " << round;
  }
}

TEST(PeerConnectorTest, NothingIsConnectedUntilAskedFor) {
  Rank r0, r1, r2;
  const std::vector<Endpoint> all = {r0.endpoint(), r1.endpoint(),
                                     r2.endpoint()};
  r0.Start(r0.Config(0, 3), all);
  r1.Start(r1.Config(1, 3), all);
  r2.Start(r2.Config(2, 3), all);
  r2.Dial(1);
  ASSERT_NE(r1.AwaitConnection(2), nullptr);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(r0.connections(), 0);
  EXPECT_EQ(r1.connections(), 1);
  EXPECT_EQ(r2.connections(), 1);
}

TEST(PeerConnectorTest, DialerOutlastsAnAcceptorThatIsLateToAnswer) {
  Rank r0, r1;
  // Rank 0 listens but runs its io thread only later (a loaded host): rank
  // 1's first attempts time out and sit, closed, in rank 0's accept queue,
  // and must not be taken for the real connection.
  r0.Start(r0.Config(0, 2), {r0.endpoint(), r1.endpoint()}, /*run=*/false);
  r1.Start(r1.Config(1, 2), {r0.endpoint(), r1.endpoint()});
  r1.Dial(0);
  absl::SleepFor(absl::Milliseconds(350));
  r0.Run();
  tcp::socket* s1 = r1.AwaitConnection(0);
  tcp::socket* s0 = r0.AwaitConnection(1);
  ASSERT_NE(s0, nullptr);
  ASSERT_NE(s1, nullptr);
  ExpectCarries(*s1, *s0);
}

TEST(PeerConnectorTest, AcceptorIgnoresStrangersAndKeepsListening) {
  Rank r0, r1;
  r0.Start(r0.Config(0, 2), {r0.endpoint(), r1.endpoint()});
  {
    // Someone else's client: sends junk, gets refused, is disconnected.
    asio::io_context io;
    tcp::socket stranger(io);
    stranger.connect(r0.endpoint());
    asio::write(stranger, asio::buffer(std::string(kHelloFixedBytes, 'x')));
    unsigned char reply = 0;
    asio::read(stranger, asio::buffer(&reply, 1));
    EXPECT_EQ(reply, static_cast<unsigned char>(HelloReply::kBadProtocol));
  }
  r1.Start(r1.Config(1, 2), {r0.endpoint(), r1.endpoint()});
  r1.Dial(0);
  EXPECT_NE(r1.AwaitConnection(0), nullptr);
  EXPECT_NE(r0.AwaitConnection(1), nullptr);
}

// What a listener answers a raw connection that sends `hello`.
unsigned char ReplyTo(const Endpoint& listener, const std::string& hello) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(listener);
  asio::write(socket, asio::buffer(hello));
  unsigned char reply = 0xff;
  asio::read(socket, asio::buffer(&reply, 1));
  return reply;
}

TEST(PeerConnectorTest, AHelloSeenOnTheWireOpensNoOtherPair) {
  Rank r0, r1, r2;
  const std::vector<Endpoint> all = {r0.endpoint(), r1.endpoint(),
                                     r2.endpoint()};
  r0.Start(r0.Config(0, 3), all);
  r1.Start(r1.Config(1, 3), all);
  // Rank 2's hello to rank 0, as an observer of that connection saw it.
  const std::string seen = EncodeHello(2, 3, HelloProof("t", 2, 0, 3));
  EXPECT_EQ(ReplyTo(r1.endpoint(), seen),
            static_cast<unsigned char>(HelloReply::kBadToken));
  EXPECT_EQ(ReplyTo(r0.endpoint(), seen),
            static_cast<unsigned char>(HelloReply::kAccepted));
  // The raw token is no proof either.
  EXPECT_EQ(ReplyTo(r0.endpoint(), EncodeHello(2, 3, "t")),
            static_cast<unsigned char>(HelloReply::kBadToken));
  EXPECT_EQ(r0.connections() + r1.connections(), 0);  // never confirmed
}

TEST(PeerConnectorTest, ADialerOfAnotherJobSizeIsRefused) {
  Rank r0, r2;
  r0.Start(r0.Config(0, 2), {r0.endpoint(), r2.endpoint()});
  // Rank 2 of a size-3 job dialing rank 0 of a size-2 job.
  r2.Start(r2.Config(2, 3), {r0.endpoint(), r0.endpoint(), r2.endpoint()});
  r2.Dial(0);
  const absl::Status failure = r2.AwaitFailure();
  EXPECT_EQ(failure.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(failure.message()),
              HasSubstr(absl::StrCat("rank 2: peer rank 0 at ",
                                     EndpointString(r0.endpoint()),
                                     " refused the hello")));
  EXPECT_EQ(r0.connections(), 0);
}

TEST(PeerConnectorTest, AWrongTokenIsRefusedWithUnauthenticated) {
  Rank r0, r1;
  r0.Start(r0.Config(0, 2), {r0.endpoint(), r1.endpoint()});
  PeerConnector::Config config = r1.Config(1, 2);
  config.token = "not the job's";
  r1.Start(config, {r0.endpoint(), r1.endpoint()});
  r1.Dial(0);
  EXPECT_EQ(r1.AwaitFailure().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(r0.connections(), 0);
}

TEST(PeerConnectorTest, APeerWhoseListenerIsGoneFailsAtOnceAsUnavailable) {
  Rank r1;
  Endpoint gone;
  {
    Rank r0;  // its port, closed again
    gone = r0.endpoint();
  }
  r1.Start(r1.Config(1, 2), {gone, r1.endpoint()});  // connect_timeout 10 s
  const absl::Time start = absl::Now();
  r1.Dial(0);
  const absl::Status failure = r1.AwaitFailure();
  EXPECT_EQ(failure, absl::UnavailableError(absl::StrCat(
                         "rank 1: rank 0 at ", EndpointString(gone),
                         " refused the connection: nothing listens there "
                         "(has its process exited?)")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PeerConnectorTest, APeerThatNeverAnswersFailsAtTheConnectTimeout) {
  Rank r1;
  // A listener nobody accepts from: connects complete in the kernel, and
  // the hello is never answered.
  asio::io_context io;
  tcp::acceptor mute(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const std::string where = EndpointString(mute.local_endpoint());
  PeerConnector::Config config = r1.Config(1, 2);
  config.connect_timeout = absl::Milliseconds(300);
  r1.Start(config, {mute.local_endpoint(), r1.endpoint()});
  const absl::Time start = absl::Now();
  r1.Dial(0);
  const absl::Status failure = r1.AwaitFailure();
  EXPECT_EQ(failure, absl::DeadlineExceededError(absl::StrCat(
                         "rank 1: could not connect to rank 0 at ", where,
                         " within 300ms (last error: ", where,
                         ": handshake timed out)")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// Reads until the other side closes; true if it did within `timeout`.
bool ClosedWithin(tcp::socket& socket, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  socket.non_blocking(true);
  char byte;
  while (absl::Now() < deadline) {
    boost::system::error_code ec;
    socket.read_some(asio::buffer(&byte, 1), ec);
    if (ec == asio::error::eof || ec == asio::error::connection_reset) {
      return true;
    }
    if (ec && ec != asio::error::would_block) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

TEST(PeerConnectorTest, ASilentConnectionIsClosedAtTheHandshakeTimeout) {
  Rank r0, r1;
  PeerConnector::Config config = r0.Config(0, 2);
  config.handshake_timeout = absl::Milliseconds(200);
  r0.Start(config, {r0.endpoint(), r1.endpoint()});
  asio::io_context io;
  tcp::socket silent(io), half(io);
  silent.connect(r0.endpoint());
  half.connect(r0.endpoint());
  asio::write(half, asio::buffer(std::string(kHelloFixedBytes / 2, 'h')));
  EXPECT_TRUE(ClosedWithin(silent, absl::Seconds(5)));
  EXPECT_TRUE(ClosedWithin(half, absl::Seconds(5)));
  r1.Start(r1.Config(1, 2), {r0.endpoint(), r1.endpoint()});
  r1.Dial(0);
  EXPECT_NE(r0.AwaitConnection(1), nullptr);
}

TEST(PeerConnectorTest, AFloodOfConnectionsKeepsOnlyTheNewestPending) {
  Rank r0, r1;
  PeerConnector::Config config = r0.Config(0, 2);
  config.handshake_timeout = absl::Seconds(60);  // only the bound acts
  config.max_pending_handshakes = 4;
  r0.Start(config, {r0.endpoint(), r1.endpoint()});
  asio::io_context io;
  std::vector<tcp::socket> held;
  for (int i = 0; i < 40; ++i) {
    held.emplace_back(io);
    held.back().connect(r0.endpoint());
    tcp::socket gone(io);  // connect and hang up at once
    gone.connect(r0.endpoint());
  }
  // All but the newest four held connections are closed by rank 0.
  for (int i = 0; i < 36; ++i) {
    EXPECT_TRUE(ClosedWithin(held[i], absl::Seconds(5))) << "connection " << i;
  }
  r1.Start(r1.Config(1, 2), {r0.endpoint(), r1.endpoint()});
  r1.Dial(0);
  EXPECT_NE(r0.AwaitConnection(1), nullptr);
}


// ---- Looking peers up ------------------------------------------------------

TEST(PeerConnectorTest, ALookupThatFailsFailsTheDialWithItsReason) {
  Rank r1;
  r1.StartLookingUp(r1.Config(1, 2), [](const std::vector<int>& peers,
                                         absl::Duration)
                        -> absl::StatusOr<std::vector<std::vector<Endpoint>>> {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", peers.front(), "'s record is unreadable"));
  });
  r1.Dial(0);
  EXPECT_EQ(r1.AwaitFailure(),
            absl::InvalidArgumentError("rank 1: looking up rank 0's address: "
                                       "rank 0's record is unreadable"));
}

// A lookup that waits its whole slice and finds nothing, as the store's Get
// of a key nobody sets.
absl::StatusOr<std::vector<std::vector<Endpoint>>> NeverPublished(
    const std::vector<int>&, absl::Duration timeout) {
  absl::SleepFor(timeout);
  return absl::DeadlineExceededError("not set");
}

TEST(PeerConnectorTest, APeerThatNeverPublishesFailsAtTheConnectTimeout) {
  Rank r1;
  PeerConnector::Config config = r1.Config(1, 2);
  config.connect_timeout = absl::Milliseconds(500);
  r1.StartLookingUp(config, NeverPublished);
  const absl::Time start = absl::Now();
  r1.Dial(0);
  EXPECT_EQ(r1.AwaitFailure(),
            absl::DeadlineExceededError(
                "rank 1: rank 0 published no address to connect to within "
                "500ms (has its process started?)"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(450));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PeerConnectorTest, CloseEndsALookupUnderWayWithinItsSlice) {
  Rank r1;
  r1.StartLookingUp(r1.Config(1, 2), NeverPublished);  // 10 s to connect
  r1.Dial(0);
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  r1.Stop();
  EXPECT_LT(absl::Now() - start,
            PeerConnector::kLookupSlice + absl::Milliseconds(500));
  EXPECT_TRUE(r1.AwaitFailure(absl::ZeroDuration()).ok());
}

TEST(PeerConnectorTest, APeerIsLookedUpOnceHoweverOftenItIsDialed) {
  Rank r0, r1;
  r0.Start(r0.Config(0, 2), {r0.endpoint(), r1.endpoint()});
  auto lookups = std::make_shared<std::atomic<int>>(0);
  const Endpoint at = r0.endpoint();
  r1.StartLookingUp(r1.Config(1, 2),
                    [lookups, at](const std::vector<int>& peers, absl::Duration)
                        -> absl::StatusOr<std::vector<std::vector<Endpoint>>> {
                      lookups->fetch_add(static_cast<int>(peers.size()));
                      return std::vector<std::vector<Endpoint>>{{at}};
                    });
  for (int i = 0; i < 5; ++i) r1.Dial(0);
  ASSERT_NE(r1.AwaitConnection(0), nullptr);
  for (int i = 0; i < 5; ++i) r1.Dial(0);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(lookups->load(), 1);
}

// Peers dialed together are looked up together; one that has not published
// yet holds up neither the others' lookups nor their connections.
TEST(PeerConnectorTest, PeersDialedTogetherAreLookedUpTogether) {
  Rank r0, r1;
  Rank r3;  // dials ranks 0, 1 and 2, all lower; rank 2 never publishes
  r0.Start(r0.Config(0, 4), {});
  r1.Start(r1.Config(1, 4), {});
  auto calls = std::make_shared<std::vector<std::vector<int>>>();
  auto mu = std::make_shared<absl::Mutex>();
  const std::vector<Endpoint> at = {r0.endpoint(), r1.endpoint()};
  r3.StartLookingUp(
      r3.Config(3, 4),
      [calls, mu, at](const std::vector<int>& peers, absl::Duration timeout)
          -> absl::StatusOr<std::vector<std::vector<Endpoint>>> {
        {
          absl::MutexLock lock(mu.get());
          calls->push_back(peers);
        }
        std::vector<std::vector<Endpoint>> found;
        for (int peer : peers) {
          if (peer >= static_cast<int>(at.size())) {
            absl::SleepFor(timeout);
            return absl::DeadlineExceededError("not set");
          }
          found.push_back({at[peer]});
        }
        return found;
      },
      /*run=*/false);
  r3.Dial(0);
  r3.Dial(1);
  r3.Dial(2);
  const absl::Time start = absl::Now();
  r3.Run();  // the three first dials are usually queued together
  // Well within the connect timeout (10 s) that rank 2's lookup waits for.
  ASSERT_NE(r3.AwaitConnection(0, absl::Seconds(3)), nullptr);
  ASSERT_NE(r3.AwaitConnection(1, absl::Seconds(3)), nullptr);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  r3.Stop();  // ends rank 2's lookup
  absl::MutexLock lock(mu.get());
  ASSERT_FALSE(calls->empty());
  EXPECT_EQ(calls->back(), std::vector<int>{2});  // looked for to the end
}

}  // namespace
}  // namespace hvd::transport::tcp_internal
