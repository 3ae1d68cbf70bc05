#include "core/rendezvous/rendezvous_server.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/job_token.h"
#include "proto/rendezvous.grpc.pb.h"
#include "proto/rendezvous_test_service.grpc.pb.h"

namespace hvd {
namespace {

namespace pb = ::hvd::rendezvous;
namespace tpb = ::hvd::rendezvous::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "0123456789abcdef-job-token";

// A second service hosted on the rendezvous server; counts handler runs.
class EchoService final : public tpb::Echo::Service {
 public:
  int runs() const { return runs_.load(); }

  grpc::Status Unary(grpc::ServerContext*, const tpb::EchoMessage* in,
                     tpb::EchoMessage* out) override {
    ++runs_;
    out->set_text(in->text());
    return grpc::Status::OK;
  }
  grpc::Status ServerStream(grpc::ServerContext*, const tpb::EchoMessage* in,
                            grpc::ServerWriter<tpb::EchoMessage>* out) override {
    ++runs_;
    out->Write(*in);
    out->Write(*in);
    return grpc::Status::OK;
  }
  grpc::Status ClientStream(grpc::ServerContext*,
                            grpc::ServerReader<tpb::EchoMessage>* in,
                            tpb::EchoMessage* out) override {
    ++runs_;
    tpb::EchoMessage m;
    while (in->Read(&m)) out->mutable_text()->append(m.text());
    return grpc::Status::OK;
  }
  grpc::Status Bidi(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<tpb::EchoMessage, tpb::EchoMessage>* stream)
      override {
    ++runs_;
    tpb::EchoMessage m;
    while (stream->Read(&m)) stream->Write(m);
    return grpc::Status::OK;
  }

 private:
  std::atomic<int> runs_{0};
};

// How a test call presents the job token.
enum class Token { kRight, kWrong, kMissing, kTwice };

class RendezvousServerTest : public ::testing::Test {
 public:  // the calls are used by the parameterized cases' tables too
  void StartServer(RendezvousServerOptions options) {
    options.address = "127.0.0.1:0";
    if (options.token.empty()) options.token = kToken;
    server_ = std::make_unique<RendezvousServer>(std::move(options));
    ASSERT_TRUE(server_->Start().ok());
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = pb::Rendezvous::NewStub(channel_);
    echo_stub_ = tpb::Echo::NewStub(channel_);
  }

  void StartServer() { StartServer(RendezvousServerOptions{}); }

  // Before the members of derived fixtures: hosted services outlive the server.
  void TearDown() override { server_.reset(); }

  static void Prepare(grpc::ClientContext* context, Token token,
                      absl::Duration timeout = absl::Seconds(20)) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    switch (token) {
      case Token::kRight:
        context->AddMetadata(rendezvous::kJobTokenMetadataKey, kToken);
        break;
      case Token::kWrong:
        context->AddMetadata(rendezvous::kJobTokenMetadataKey, "guessed-token");
        break;
      case Token::kMissing:
        break;
      case Token::kTwice:
        context->AddMetadata(rendezvous::kJobTokenMetadataKey, "guessed-token");
        context->AddMetadata(rendezvous::kJobTokenMetadataKey, kToken);
        break;
    }
  }

  grpc::Status Register(int rank, const std::string& host, int64_t pid,
                        pb::RegisterResponse* response = nullptr,
                        Token token = Token::kRight) {
    pb::RegisterRequest request;
    request.set_rank(rank);
    request.set_hostname(host);
    request.set_pid(pid);
    request.add_addresses(absl::StrCat(host, ":7000"));
    pb::RegisterResponse ignored;
    grpc::ClientContext context;
    Prepare(&context, token);
    return stub_->Register(&context, request, response ? response : &ignored);
  }

  grpc::Status Set(const std::string& key, const std::string& value,
                   Token token = Token::kRight) {
    pb::SetRequest request;
    request.set_key(key);
    request.set_value(value);
    pb::SetResponse response;
    grpc::ClientContext context;
    Prepare(&context, token);
    return stub_->Set(&context, request, &response);
  }

  grpc::Status Get(const std::string& key, absl::Duration wait,
                   std::string* value = nullptr, Token token = Token::kRight) {
    pb::GetRequest request;
    request.set_key(key);
    request.set_timeout_ms(absl::ToInt64Milliseconds(wait));
    pb::GetResponse response;
    grpc::ClientContext context;
    Prepare(&context, token, wait + absl::Seconds(20));
    grpc::Status status = stub_->Get(&context, request, &response);
    if (value != nullptr) *value = response.value();
    return status;
  }

  grpc::Status Barrier(const std::string& name, int count, absl::Duration wait,
                       const std::string& participant,
                       Token token = Token::kRight,
                       std::string* arrived_metadata = nullptr) {
    pb::BarrierRequest request;
    request.set_name(name);
    request.set_count(count);
    request.set_timeout_ms(absl::ToInt64Milliseconds(wait));
    request.set_participant(participant);
    pb::BarrierResponse response;
    grpc::ClientContext context;
    Prepare(&context, token, wait + absl::Seconds(20));
    grpc::Status status = stub_->Barrier(&context, request, &response);
    if (arrived_metadata != nullptr) {
      const auto& trailing = context.GetServerTrailingMetadata();
      auto it = trailing.find("hvd-barrier-arrived");
      if (it != trailing.end()) {
        arrived_metadata->assign(it->second.data(), it->second.size());
      }
    }
    return status;
  }

  std::unique_ptr<RendezvousServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Rendezvous::Stub> stub_;
  std::unique_ptr<tpb::Echo::Stub> echo_stub_;
};

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

TEST_F(RendezvousServerTest, RankTakenByAnotherProcessIsAlreadyExistsNamingBoth) {
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

// One call of each Rendezvous method with the given token.
struct MethodCase {
  const char* method;
  std::function<grpc::Status(RendezvousServerTest*, Token)> call;
};

class RendezvousAuthTest
    : public RendezvousServerTest,
      public ::testing::WithParamInterface<std::tuple<MethodCase, Token>> {};

TEST_P(RendezvousAuthTest, BadTokenIsUnauthenticatedAndLogsThePeer) {
  StartServer();
  const auto& [method, token] = GetParam();
  ::testing::internal::CaptureStderr();
  grpc::Status status = method.call(this, token);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message(), "missing or wrong job token");
  EXPECT_THAT(log, HasSubstr(absl::StrCat("WARNING] rendezvous: rejected "
                                          "/hvd.rendezvous.Rendezvous/",
                                          method.method,
                                          " from ipv4:127.0.0.1:")));
  EXPECT_THAT(log, Not(HasSubstr("guessed-token")));
  EXPECT_THAT(log, Not(HasSubstr(kToken)));
}

TEST_P(RendezvousAuthTest, BadTokenChangesNothing) {
  StartServer();
  const auto& [method, token] = GetParam();
  method.call(this, token);
  EXPECT_TRUE(server_->Workers().empty());
  EXPECT_EQ(Get("k", absl::ZeroDuration()).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // A barrier of 1 would complete at once had the rejected call arrived.
  EXPECT_EQ(Barrier("b", 2, absl::ZeroDuration(), "other").error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

const MethodCase kMethods[] = {
    {"Register",
     [](RendezvousServerTest* t, Token token) {
       return t->Register(0, "host-a", 1, nullptr, token);
     }},
    {"Set", [](RendezvousServerTest* t,
               Token token) { return t->Set("k", "v", token); }},
    {"Get",
     [](RendezvousServerTest* t, Token token) {
       return t->Get("k", absl::Seconds(5), nullptr, token);
     }},
    {"Barrier",
     [](RendezvousServerTest* t, Token token) {
       return t->Barrier("b", 2, absl::Seconds(5), "intruder", token);
     }},
};

INSTANTIATE_TEST_SUITE_P(
    EveryMethod, RendezvousAuthTest,
    ::testing::Combine(::testing::ValuesIn(kMethods),
                       ::testing::Values(Token::kWrong, Token::kMissing,
                                         Token::kTwice)),
    [](const auto& info) {
      const Token token = std::get<1>(info.param);
      return absl::StrCat(std::get<0>(info.param).method,
                          token == Token::kWrong     ? "WrongToken"
                          : token == Token::kMissing ? "MissingToken"
                                                     : "TokenTwice");
    });

// ---- Extra services ----

class ExtraServiceTest : public RendezvousServerTest {
 protected:
  void SetUp() override {
    RendezvousServerOptions options;
    options.extra_services = {&echo_};
    StartServer(options);
  }

  grpc::Status Unary(Token token, std::string* out = nullptr) {
    grpc::ClientContext context;
    Prepare(&context, token);
    tpb::EchoMessage in, reply;
    in.set_text("hi");
    grpc::Status status = echo_stub_->Unary(&context, in, &reply);
    if (out != nullptr) *out = reply.text();
    return status;
  }

  grpc::Status ServerStream(Token token, int* received) {
    grpc::ClientContext context;
    Prepare(&context, token);
    tpb::EchoMessage in, reply;
    in.set_text("hi");
    auto reader = echo_stub_->ServerStream(&context, in);
    *received = 0;
    while (reader->Read(&reply)) ++*received;
    return reader->Finish();
  }

  grpc::Status ClientStream(Token token, std::string* out) {
    grpc::ClientContext context;
    Prepare(&context, token);
    tpb::EchoMessage in, reply;
    auto writer = echo_stub_->ClientStream(&context, &reply);
    for (const char* text : {"a", "b"}) {
      in.set_text(text);
      if (!writer->Write(in)) break;
    }
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    *out = reply.text();
    return status;
  }

  grpc::Status Bidi(Token token, int* received) {
    grpc::ClientContext context;
    Prepare(&context, token);
    tpb::EchoMessage in, reply;
    in.set_text("hi");
    auto stream = echo_stub_->Bidi(&context);
    stream->Write(in);
    stream->Write(in);
    stream->WritesDone();
    *received = 0;
    while (stream->Read(&reply)) ++*received;
    return stream->Finish();
  }

  EchoService echo_;
};

TEST_F(ExtraServiceTest, EveryKindOfMethodWorksWithTheToken) {
  std::string text;
  int received = 0;
  ASSERT_TRUE(Unary(Token::kRight, &text).ok());
  EXPECT_EQ(text, "hi");
  ASSERT_TRUE(ServerStream(Token::kRight, &received).ok());
  EXPECT_EQ(received, 2);
  ASSERT_TRUE(ClientStream(Token::kRight, &text).ok());
  EXPECT_EQ(text, "ab");
  ASSERT_TRUE(Bidi(Token::kRight, &received).ok());
  EXPECT_EQ(received, 2);
  EXPECT_EQ(echo_.runs(), 4);
}

TEST_F(ExtraServiceTest, EveryKindOfMethodRejectsABadTokenWithoutRunning) {
  for (Token token : {Token::kWrong, Token::kMissing}) {
    std::string text;
    int received = 0;
    grpc::Status unary = Unary(token);
    EXPECT_EQ(unary.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(unary.error_message(), "missing or wrong job token");
    EXPECT_EQ(ServerStream(token, &received).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(received, 0);
    EXPECT_EQ(ClientStream(token, &text).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Bidi(token, &received).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(received, 0);
  }
  EXPECT_EQ(echo_.runs(), 0);
}

TEST(RendezvousServerExtraServices, ServiceIsRestoredForTheNextServer) {
  EchoService echo;
  for (const char* token : {"first-token", "second-token"}) {
    RendezvousServerOptions options;
    options.address = "127.0.0.1:0";
    options.token = token;
    options.extra_services = {&echo};
    RendezvousServer server(options);
    ASSERT_TRUE(server.Start().ok());
    auto stub = tpb::Echo::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                            grpc::InsecureChannelCredentials()));
    for (const char* presented : {"first-token", "second-token"}) {
      grpc::ClientContext context;
      context.AddMetadata(rendezvous::kJobTokenMetadataKey, presented);
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
      tpb::EchoMessage in, out;
      grpc::Status status = stub->Unary(&context, in, &out);
      EXPECT_EQ(status.ok(), std::string(presented) == token)
          << "server token " << token << ", presented " << presented;
    }
  }
}

TEST(RendezvousServerExtraServices, AsyncServiceIsRefusedNamingTheMethod) {
  tpb::Echo::AsyncService async_echo;
  RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  options.token = kToken;
  options.extra_services = {&async_echo};
  RendezvousServer server(options);
  absl::Status status = server.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("/hvd.rendezvous.testing.Echo/"));
  EXPECT_THAT(status.message(), HasSubstr("async or callback API"));
  EXPECT_EQ(server.port(), 0);
}

}  // namespace
}  // namespace hvd
