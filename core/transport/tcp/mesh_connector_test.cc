#include "core/transport/tcp/mesh_connector.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/transport/tcp/handshake.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport::tcp_internal {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using ::testing::HasSubstr;

// One rank's side of a connector: its own io_context and listener.
struct Rank {
  asio::io_context io;
  tcp::acceptor acceptor{io,
                         tcp::endpoint(asio::ip::address_v4::loopback(), 0)};

  Endpoint endpoint() const { return acceptor.local_endpoint(); }

  MeshConnector::Config Config(int rank, int size) const {
    MeshConnector::Config config;
    config.rank = rank;
    config.size = size;
    config.token = "t";
    config.timeout = absl::Seconds(10);
    config.deadline = absl::Now() + config.timeout;
    config.attempt_timeout = absl::Milliseconds(100);
    return config;
  }
};

TEST(MeshConnectorTest, DialerOutlastsAnAcceptorThatIsLateToAnswer) {
  Rank r0, r1;
  absl::StatusOr<std::vector<std::optional<Connection>>> c0, c1;
  // Rank 0 listens but runs its connector only later (as when its store
  // lookups are slow): rank 1's first attempts time out and sit, closed, in
  // rank 0's accept queue, and must not be taken for the real connection.
  std::thread t0([&] {
    absl::SleepFor(absl::Milliseconds(350));
    MeshConnector connector(r0.io, r0.acceptor, r0.Config(0, 2));
    c0 = connector.Run({});
  });
  MeshConnector connector(r1.io, r1.acceptor, r1.Config(1, 2));
  c1 = connector.Run({{r0.endpoint()}});
  t0.join();
  ASSERT_TRUE(c0.ok()) << c0.status();
  ASSERT_TRUE(c1.ok()) << c1.status();
  tcp::socket& s0 = (*c0)[1]->socket;
  tcp::socket& s1 = (*c1)[0]->socket;
  asio::write(s1, asio::buffer("ping", 4));
  char got[4];
  asio::read(s0, asio::buffer(got, 4));
  EXPECT_EQ(std::string(got, 4), "ping");
  EXPECT_EQ((*c1)[0]->address, EndpointString(r0.endpoint()));
}

TEST(MeshConnectorTest, AcceptorIgnoresStrangersAndKeepsListening) {
  Rank r0, r1;
  absl::StatusOr<std::vector<std::optional<Connection>>> c0;
  std::thread t0([&] {
    MeshConnector connector(r0.io, r0.acceptor, r0.Config(0, 2));
    c0 = connector.Run({});
  });
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
  MeshConnector connector(r1.io, r1.acceptor, r1.Config(1, 2));
  auto c1 = connector.Run({{r0.endpoint()}});
  t0.join();
  EXPECT_TRUE(c0.ok()) << c0.status();
  EXPECT_TRUE(c1.ok()) << c1.status();
}

TEST(MeshConnectorTest, RankOutsideTheAcceptedRangeIsRefused) {
  Rank r0, r2;
  absl::StatusOr<std::vector<std::optional<Connection>>> c0;
  std::thread t0([&] {
    MeshConnector::Config config = r0.Config(0, 2);
    config.deadline = absl::Now() + absl::Milliseconds(300);
    MeshConnector connector(r0.io, r0.acceptor, config);
    c0 = connector.Run({});
  });
  // Rank 2 of a size-3 job dialing rank 0 of a size-2 job.
  MeshConnector connector(r2.io, r2.acceptor, r2.Config(2, 3));
  auto c2 = connector.Run({{r0.endpoint()}, {r0.endpoint()}});
  t0.join();
  EXPECT_EQ(c2.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c2.status().message()),
              HasSubstr(absl::StrCat("rank 2: peer rank 0 at ",
                                     EndpointString(r0.endpoint()),
                                     " refused the hello")));
  EXPECT_EQ(c0.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(MeshConnectorTest, ACancelledConnectGivesUpWithTheCancellation) {
  // Rank 0 waits for a rank 1 that never dials (a peer that died after
  // publishing its address); the cancellation, not the deadline, ends it.
  Rank r0;
  auto cancel = std::make_shared<Cancellation>();
  MeshConnector::Config config = r0.Config(0, 2);
  config.cancel = cancel;
  config.cancel_poll = absl::Milliseconds(10);
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel->Cancel(absl::AbortedError("elastic round 4 ended"));
  });
  const absl::Time start = absl::Now();
  MeshConnector connector(r0.io, r0.acceptor, config);
  auto c0 = connector.Run({});
  canceller.join();
  EXPECT_EQ(c0.status(), absl::AbortedError("elastic round 4 ended"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // the deadline is 10 s
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

TEST(MeshConnectorTest, ASilentConnectionIsClosedAtTheHandshakeTimeout) {
  Rank r0, r1;
  absl::StatusOr<std::vector<std::optional<Connection>>> c0;
  std::thread t0([&] {
    MeshConnector::Config config = r0.Config(0, 2);
    config.handshake_timeout = absl::Milliseconds(200);
    MeshConnector connector(r0.io, r0.acceptor, config);
    c0 = connector.Run({});
  });
  asio::io_context io;
  tcp::socket silent(io), half(io);
  silent.connect(r0.endpoint());
  half.connect(r0.endpoint());
  asio::write(half, asio::buffer(std::string(kHelloFixedBytes / 2, 'h')));
  EXPECT_TRUE(ClosedWithin(silent, absl::Seconds(5)));
  EXPECT_TRUE(ClosedWithin(half, absl::Seconds(5)));
  MeshConnector connector(r1.io, r1.acceptor, r1.Config(1, 2));
  auto c1 = connector.Run({{r0.endpoint()}});
  t0.join();
  EXPECT_TRUE(c0.ok()) << c0.status();
  EXPECT_TRUE(c1.ok()) << c1.status();
}

TEST(MeshConnectorTest, AFloodOfConnectionsKeepsOnlyTheNewestPending) {
  Rank r0, r1;
  absl::StatusOr<std::vector<std::optional<Connection>>> c0;
  std::thread t0([&] {
    MeshConnector::Config config = r0.Config(0, 2);
    config.handshake_timeout = absl::Seconds(60);  // only the bound acts
    config.max_pending_handshakes = 4;
    MeshConnector connector(r0.io, r0.acceptor, config);
    c0 = connector.Run({});
  });
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
  MeshConnector connector(r1.io, r1.acceptor, r1.Config(1, 2));
  auto c1 = connector.Run({{r0.endpoint()}});
  t0.join();
  EXPECT_TRUE(c0.ok()) << c0.status();
  EXPECT_TRUE(c1.ok()) << c1.status();
}

}  // namespace
}  // namespace hvd::transport::tcp_internal
