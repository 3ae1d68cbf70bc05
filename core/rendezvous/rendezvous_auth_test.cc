// The rendezvous server's job token: every method of its own and of hosted
// services refuses a call without the right token, before running it.
#include <grpcpp/generic/generic_stub.h>

#include <functional>
#include <memory>
#include <string>
#include <tuple>

#include "absl/time/clock.h"
#include "core/rendezvous/rendezvous_server_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::rendezvous_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
  EXPECT_THAT(log,
              HasSubstr(absl::StrCat("WARNING] rendezvous: rejected "
                                     "/hvd.rendezvous.Rendezvous/",
                                     method.method, " from ipv4:127.0.0.1:")));
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
    {"GetMany",
     [](RendezvousServerTest* t, Token token) {
       return t->GetMany({"k"}, absl::Seconds(5), nullptr, token);
     }},
    {"Barrier",
     [](RendezvousServerTest* t, Token token) {
       return t->Barrier("b", 2, absl::Seconds(5), "intruder", token);
     }},
};

INSTANTIATE_TEST_SUITE_P(EveryMethod, RendezvousAuthTest,
                         ::testing::Combine(::testing::ValuesIn(kMethods),
                                            ::testing::Values(Token::kWrong,
                                                              Token::kMissing,
                                                              Token::kTwice)),
                         [](const auto& info) {
                           const Token token = std::get<1>(info.param);
                           return absl::StrCat(
                               std::get<0>(info.param).method,
                               token == Token::kWrong     ? "WrongToken"
                               : token == Token::kMissing ? "MissingToken"
                                                          : "TokenTwice");
                         });

// ---- What a call costs before its token is checked ----

TEST_F(RendezvousServerTest, ABadTokenIsRefusedBeforeTheRequestBodyIsRead) {
  StartServer();
  // Larger than the 4 MB gRPC accepts: reading it would fail the call as
  // RESOURCE_EXHAUSTED, so UNAUTHENTICATED shows the body was never read.
  const std::string oversized(5 << 20, 'x');
  for (Token token : {Token::kWrong, Token::kMissing}) {
    EXPECT_EQ(Set("k", oversized, token).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(Set("k", oversized).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Set("k", "v").ok());
}

// A raw call that ends its request stream without sending a message, as a
// hand-made HTTP/2 client may.
grpc::Status CallWithoutRequest(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& method, Token token) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  RendezvousServerTest::Prepare(&context, token);
  auto call = stub.PrepareCall(&context, method, &cq);
  grpc::Status status;
  int tag = 0;
  auto step = [&](auto start) {
    start(&tag);
    void* got = nullptr;
    bool ok = false;
    return cq.Next(&got, &ok) && ok;
  };
  step([&](void* t) { call->StartCall(t); });
  step([&](void* t) { call->WritesDone(t); });
  step([&](void* t) { call->Finish(&status, t); });
  cq.Shutdown();
  void* got = nullptr;
  bool ok = false;
  while (cq.Next(&got, &ok)) {
  }
  return status;
}

TEST_F(RendezvousServerTest, ACallWithoutARequestMessageIsRefusedNotRun) {
  StartServer();
  for (const char* method : {"Register", "Set", "Get", "GetMany", "Barrier"}) {
    grpc::Status status =
        CallWithoutRequest(channel_,
                           absl::StrCat("/hvd.rendezvous.Rendezvous/", method),
                           Token::kRight);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method;
    EXPECT_EQ(status.error_message(), "the call carried no request message");
  }
  EXPECT_TRUE(server_->Workers().empty());
  EXPECT_TRUE(Set("k", "v").ok());  // the server is still serving
}

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
}  // namespace hvd::rendezvous_test
