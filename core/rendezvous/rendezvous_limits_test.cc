// The rendezvous server's bounds: what a caller with the token can make it
// hold (key size, store bytes, waiting calls, barrier counts), and how much
// log a caller without it can cause.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/rendezvous/rendezvous_server_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::rendezvous_test {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

class RendezvousLimitsTest : public RendezvousServerTest {};

TEST_F(RendezvousLimitsTest, AnOversizedKeyIsRefusedWithAShortMessage) {
  StartServer();
  const std::string key(5000, 'k');
  grpc::Status set = Set(key, "v");
  EXPECT_EQ(set.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(set.error_message(),
              HasSubstr("...' (5000 bytes) is longer than the rendezvous "
                        "server's limit of 4096 bytes"));
  EXPECT_LT(set.error_message().size(), 200u);
  EXPECT_EQ(Get(key, absl::ZeroDuration()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Barrier(key, 1, absl::ZeroDuration(), "p").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RendezvousLimitsTest, TheStoreStopsAtItsByteLimitAndKeepsWhatItHad) {
  RendezvousServerOptions options;
  options.limits.max_store_bytes = 1000;
  StartServer(options);
  ASSERT_TRUE(Set("k1", std::string(600, 'a')).ok());
  grpc::Status full = Set("k2", std::string(600, 'b'));
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(full.error_message(),
            "storing 600 bytes at key 'k2' would take the rendezvous store "
            "past its limit of 1000 bytes (602 in use)");
  EXPECT_EQ(Get("k2", absl::ZeroDuration()).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // A replaced value counts once: 2 + 990 bytes fit where 602 were.
  EXPECT_TRUE(Set("k1", std::string(990, 'c')).ok());
  std::string value;
  ASSERT_TRUE(Get("k1", absl::ZeroDuration(), &value).ok());
  EXPECT_EQ(value, std::string(990, 'c'));
  // Shrinking it frees room for another key.
  EXPECT_TRUE(Set("k1", "small").ok());
  EXPECT_TRUE(Set("k2", std::string(600, 'b')).ok());
}

TEST_F(RendezvousLimitsTest, WaitingCallsAreBoundedAndANonWaitingGetIsNot) {
  RendezvousServerOptions options;
  options.limits.max_blocked_calls = 2;
  StartServer(options);
  std::vector<std::thread> waiters;
  std::vector<grpc::Status> statuses(2);
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([this, i, &statuses] {
      statuses[i] = Get("later", absl::Seconds(30));
    });
  }
  ASSERT_TRUE(server_->WaitForBlockedCalls(2, absl::Seconds(20)));
  grpc::Status third = Get("later", absl::Seconds(30));
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(third.error_message(),
            "the rendezvous server already has 2 waiting Get and Barrier "
            "calls, its limit");
  grpc::Status barrier = Barrier("b", 2, absl::Seconds(30), "p");
  EXPECT_EQ(barrier.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Get("other", absl::ZeroDuration()).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(Set("later", "now").ok());
  for (std::thread& t : waiters) t.join();
  for (const grpc::Status& s : statuses) EXPECT_TRUE(s.ok()) << s.error_message();
  // The refused barrier arrival was not counted: two others complete it.
  std::thread first([this] {
    EXPECT_TRUE(Barrier("b", 2, absl::Seconds(30), "p").ok());
  });
  EXPECT_TRUE(Barrier("b", 2, absl::Seconds(30), "q").ok());
  first.join();
}

TEST_F(RendezvousLimitsTest, ABarrierOfMoreThanTheJobIsInvalidArgument) {
  RendezvousServerOptions options;
  options.size = 2;
  StartServer(options);
  grpc::Status s = Barrier("b", 3, absl::Seconds(1), "p");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "barrier 'b': count 3 is more than the job's 2 processes");
  EXPECT_TRUE(Barrier("b", 1, absl::Seconds(1), "p").ok());
}

TEST_F(RendezvousLimitsTest, RejectionsAreLoggedOnceThenSummedUp) {
  RendezvousServerOptions options;
  options.rejection_log_interval = absl::Hours(1);
  StartServer(options);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 50; ++i) Set("k", "v", Token::kWrong);
  const std::string during = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(std::vector<std::string>(
                  absl::StrSplit(during, '\n', absl::SkipEmpty())),
              SizeIs(1))
      << during;
  EXPECT_THAT(during, HasSubstr("rejected /hvd.rendezvous.Rendezvous/Set from"));
  ::testing::internal::CaptureStderr();
  server_.reset();  // the rest are summed up when the server goes
  const std::string after = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(after,
              HasSubstr("rendezvous: rejected 49 calls with a missing or "
                        "wrong job token (latest: "
                        "/hvd.rendezvous.Rendezvous/Set from ipv4:127.0.0.1:"));
}

TEST_F(RendezvousLimitsTest, AnIdleConnectionIsClosedAndClientsReconnect) {
  RendezvousServerOptions options;
  options.idle_connection_timeout = absl::Milliseconds(300);
  StartServer(options);
  // A raw connection that sends the HTTP/2 preface and an empty SETTINGS
  // frame, then nothing.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string preface =
      std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
      std::string("\0\0\0\x04\0\0\0\0\0", 9);
  ASSERT_EQ(write(fd, preface.data(), preface.size()),
            static_cast<ssize_t>(preface.size()));
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const absl::Time start = absl::Now();
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) {
  }
  EXPECT_EQ(n, 0) << "the server did not close the idle connection";
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  close(fd);
  // The test's own channel went idle too; its next call reconnects.
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_TRUE(Set("k", "v").ok());
}

}  // namespace
}  // namespace hvd::rendezvous_test
