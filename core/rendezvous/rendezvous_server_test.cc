// The rendezvous server: start-up, registration and rank assignment, the
// key-value store, barriers and shutdown, over real gRPC on loopback.
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/rendezvous/rendezvous_server_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::rendezvous_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(RendezvousServerTest, ListensOnAnEphemeralPort) {
  StartServer();
  EXPECT_GT(server_->port(), 0);
}

TEST_F(RendezvousServerTest, StartWithoutTokenIsInvalidArgument) {
  RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  RendezvousServer server(options);
  absl::Status status = server.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("job token is empty"));
}

TEST_F(RendezvousServerTest, StartTwiceIsFailedPrecondition) {
  StartServer();
  EXPECT_EQ(server_->Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RendezvousServerTest, PortInUseIsUnavailableNamingTheAddress) {
  StartServer();
  RendezvousServerOptions options;
  options.token = kToken;
  options.address = absl::StrCat("127.0.0.1:", server_->port());
  RendezvousServer second(options);
  absl::Status status = second.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr(options.address));
}

TEST_F(RendezvousServerTest, RegisterIsVisibleInWorkers) {
  RendezvousServerOptions options;
  options.size = 4;
  StartServer(options);
  pb::RegisterResponse response;
  ASSERT_TRUE(Register(2, "host-a", 4242, &response).ok());
  EXPECT_EQ(response.rank(), 2);
  EXPECT_EQ(response.size(), 4);

  std::vector<WorkerInfo> workers = server_->Workers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].rank, 2);
  EXPECT_EQ(workers[0].hostname, "host-a");
  EXPECT_EQ(workers[0].pid, 4242);
  EXPECT_THAT(workers[0].addresses, ElementsAre("host-a:7000"));
  EXPECT_THAT(workers[0].peer, HasSubstr("127.0.0.1"));
}

TEST_F(RendezvousServerTest, RankMinusOneGetsTheLowestFreeRank) {
  StartServer();
  ASSERT_TRUE(Register(0, "host-a", 1).ok());
  ASSERT_TRUE(Register(2, "host-a", 3).ok());
  pb::RegisterResponse response;
  ASSERT_TRUE(Register(-1, "host-b", 2, &response).ok());
  EXPECT_EQ(response.rank(), 1);
  EXPECT_EQ(response.size(), 0);  // the server was not told the job size
}

TEST_F(RendezvousServerTest, RepeatedRegisterIsIdempotentAndReportedOnce) {
  std::atomic<int> reported{0};
  RendezvousServerOptions options;
  options.on_register = [&](const WorkerInfo&) { ++reported; };
  StartServer(options);
  pb::RegisterResponse first, second;
  ASSERT_TRUE(Register(-1, "host-a", 7, &first).ok());
  ASSERT_TRUE(Register(-1, "host-a", 7, &second).ok());
  ASSERT_TRUE(Register(first.rank(), "host-a", 7).ok());
  EXPECT_EQ(first.rank(), second.rank());
  EXPECT_EQ(reported.load(), 1);
  EXPECT_EQ(server_->Workers().size(), 1u);
}

TEST_F(RendezvousServerTest,
       AProcessHoldingSeveralRanksRetriesEachAndMinusOneMeansItsLowest) {
  StartServer();
  ASSERT_TRUE(Register(3, "host-a", 9).ok());
  ASSERT_TRUE(Register(1, "host-a", 9).ok());
  ASSERT_TRUE(Register(3, "host-a", 9).ok());
  pb::RegisterResponse again;
  ASSERT_TRUE(Register(-1, "host-a", 9, &again).ok());
  EXPECT_EQ(again.rank(), 1);
  pb::RegisterResponse other;
  ASSERT_TRUE(Register(-1, "host-a", 10, &other).ok());
  EXPECT_EQ(other.rank(), 0);
  EXPECT_EQ(server_->Workers().size(), 3u);
}

TEST_F(RendezvousServerTest,
       RankTakenByAnotherProcessIsAlreadyExistsNamingBoth) {
  StartServer();
  ASSERT_TRUE(Register(1, "host-a", 100).ok());
  grpc::Status status = Register(1, "host-b", 200);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(status.error_message(), HasSubstr("rank 1"));
  EXPECT_THAT(status.error_message(), HasSubstr("host-a pid 100"));
  EXPECT_THAT(status.error_message(), HasSubstr("host-b pid 200"));
}

TEST_F(RendezvousServerTest, RankOutOfRangeIsInvalidArgument) {
  RendezvousServerOptions options;
  options.size = 2;
  StartServer(options);
  grpc::Status status = Register(2, "host-a", 1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("rank 2 requested by host-a pid 1"));
  EXPECT_THAT(status.error_message(), HasSubstr("job of size 2"));
  EXPECT_EQ(Register(-2, "host-a", 1).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RendezvousServerTest, NoFreeRankIsResourceExhausted) {
  RendezvousServerOptions options;
  options.size = 1;
  StartServer(options);
  ASSERT_TRUE(Register(-1, "host-a", 1).ok());
  grpc::Status status = Register(-1, "host-b", 2);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("all 1 ranks"));
}

TEST_F(RendezvousServerTest, WaitForRanksReturnsTheMissingRanks) {
  StartServer();
  ASSERT_TRUE(Register(0, "host-a", 1).ok());
  ASSERT_TRUE(Register(2, "host-a", 3).ok());
  EXPECT_THAT(server_->WaitForRanks(4, absl::Milliseconds(50)),
              ElementsAre(1, 3));
}

TEST_F(RendezvousServerTest, WaitForRanksReturnsOnceAllRegistered) {
  StartServer();
  std::thread workers([&] {
    for (int rank = 3; rank >= 0; --rank) {
      EXPECT_TRUE(Register(rank, "host-a", 100 + rank).ok());
    }
  });
  EXPECT_THAT(server_->WaitForRanks(4, absl::Seconds(30)), ElementsAre());
  workers.join();
}

TEST_F(RendezvousServerTest, OnRegisterSeesTheNewWorker) {
  absl::Mutex mu;
  std::vector<WorkerInfo> seen;
  RendezvousServerOptions options;
  options.on_register = [&](const WorkerInfo& w) {
    absl::MutexLock lock(&mu);
    seen.push_back(w);
  };
  StartServer(options);
  ASSERT_TRUE(Register(0, "host-z", 9).ok());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].hostname, "host-z");
  EXPECT_EQ(seen[0].rank, 0);
}

TEST_F(RendezvousServerTest, GetReturnsWhatSetStored) {
  StartServer();
  ASSERT_TRUE(Set("k", "v").ok());
  std::string value;
  ASSERT_TRUE(Get("k", absl::ZeroDuration(), &value).ok());
  EXPECT_EQ(value, "v");
}

TEST_F(RendezvousServerTest, GetTimeoutIsDeadlineExceededNamingTheKey) {
  StartServer();
  grpc::Status status = Get("never-set", absl::Milliseconds(20));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(), "key 'never-set' not set within 20ms");
}

TEST_F(RendezvousServerTest, GetManyAnswersEveryKeyInTheOrderAsked) {
  StartServer();
  ASSERT_TRUE(Set("b", "2").ok());
  ASSERT_TRUE(Set("a", "1").ok());
  std::vector<std::string> values;
  ASSERT_TRUE(GetMany({"b", "a", "b"}, absl::ZeroDuration(), &values).ok());
  EXPECT_EQ(values, (std::vector<std::string>{"2", "1", "2"}));
}

TEST_F(RendezvousServerTest, GetManyWaitsForTheLastKey) {
  StartServer();
  ASSERT_TRUE(Set("a", "1").ok());
  std::vector<std::string> values;
  grpc::Status status;
  std::thread getter(
      [&] { status = GetMany({"a", "late"}, absl::Seconds(30), &values); });
  ASSERT_TRUE(server_->WaitForBlockedCalls(1, absl::Seconds(20)));
  ASSERT_TRUE(Set("late", "2").ok());
  getter.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2"}));
}

TEST_F(RendezvousServerTest, GetManyTimeoutNamesAMissingKeyAndCountsTheRest) {
  StartServer();
  ASSERT_TRUE(Set("a", "1").ok());
  grpc::Status status =
      GetMany({"a", "x", "y", "z"}, absl::Milliseconds(20));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(),
            "key 'x' and 2 other(s) of 4 not set within 20ms");
}

TEST_F(RendezvousServerTest, GetManyOfMoreKeysThanOneCallAnswersIsRefused) {
  StartServer();
  std::vector<std::string> keys(4097, "k");
  grpc::Status status = GetMany(keys, absl::ZeroDuration());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "GetMany asks for 4097 keys; one call answers at most 4096");
}

// An answer stops after 3 MiB of values, but always carries the first.
TEST_F(RendezvousServerTest, GetManyAnswersTheFirstValuesThatFitOneAnswer) {
  StartServer();
  const std::string mib(1 << 20, 'v');
  const std::string big(3 << 20, 'w');
  ASSERT_TRUE(Set("m", mib).ok());
  ASSERT_TRUE(Set("big", big).ok());
  std::vector<std::string> values;
  ASSERT_TRUE(GetMany({"m", "m", "m", "m"}, absl::ZeroDuration(), &values).ok());
  EXPECT_EQ(values.size(), 3u);
  ASSERT_TRUE(GetMany({"big", "m"}, absl::ZeroDuration(), &values).ok());
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0], big);
}

TEST_F(RendezvousServerTest, BlockedGetIsReleasedWhenTheClientCancels) {
  StartServer();
  grpc::ClientContext context;
  Prepare(&context, Token::kRight, absl::Seconds(60));
  std::thread waiter([&] {
    pb::GetRequest request;
    request.set_key("k");
    request.set_timeout_ms(60000);
    pb::GetResponse response;
    grpc::Status status = stub_->Get(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  });
  ASSERT_TRUE(server_->WaitForBlockedCalls(1, absl::Seconds(20)));
  context.TryCancel();
  waiter.join();
  EXPECT_TRUE(server_->WaitForBlockedCalls(0, absl::Seconds(20)));
}

TEST_F(RendezvousServerTest, ShutdownFailsBlockedGetWithUnavailable) {
  StartServer();
  grpc::Status status;
  std::thread waiter([&] { status = Get("k", absl::Seconds(50)); });
  ASSERT_TRUE(server_->WaitForBlockedCalls(1, absl::Seconds(20)));
  server_->Shutdown();
  waiter.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
}

TEST_F(RendezvousServerTest, WaitForBlockedCallsSaysWhetherTheCountWasReached) {
  StartServer();
  EXPECT_TRUE(server_->WaitForBlockedCalls(0, absl::Seconds(20)));
  EXPECT_FALSE(server_->WaitForBlockedCalls(1, absl::Milliseconds(20)));
}

TEST_F(RendezvousServerTest, ShutdownIsIdempotent) {
  StartServer();
  server_->Shutdown();
  server_->Shutdown();
  server_.reset();  // the destructor shuts down a third time
}

TEST_F(RendezvousServerTest, BarrierRetryWithTheSameParticipantCountsOnce) {
  StartServer();
  std::string arrived;
  EXPECT_EQ(Barrier("b", 2, absl::ZeroDuration(), "p1").error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  grpc::Status status =
      Barrier("b", 2, absl::ZeroDuration(), "p1", Token::kRight, &arrived);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(), "barrier 'b': 1 of 2 arrived within 0");
  EXPECT_EQ(arrived, "1");
  EXPECT_TRUE(Barrier("b", 2, absl::ZeroDuration(), "p2").ok());
}

TEST_F(RendezvousServerTest, BarrierCountMismatchIsFailedPrecondition) {
  StartServer();
  Barrier("b", 3, absl::ZeroDuration(), "p1");
  grpc::Status status = Barrier("b", 2, absl::ZeroDuration(), "p2");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(),
            "this caller expects 2 participants, an earlier one 3");
}

// ---- The job token ----

}  // namespace
}  // namespace hvd::rendezvous_test
