// The fixture of the rendezvous server's tests: a server on an ephemeral
// loopback port with a client stub, calls of every Rendezvous method that
// present the job token right, wrong, missing or twice, and a second
// (echo) service to host on the server.
#ifndef HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_TEST_FIXTURE_H_
#define HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_TEST_FIXTURE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/rendezvous/rendezvous_server.h"
#include "gtest/gtest.h"
#include "proto/job_token.h"
#include "proto/rendezvous.grpc.pb.h"
#include "proto/rendezvous_test_service.grpc.pb.h"

namespace hvd::rendezvous_test {

namespace pb = ::hvd::rendezvous;
namespace tpb = ::hvd::rendezvous::testing;

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
  grpc::Status ServerStream(
      grpc::ServerContext*, const tpb::EchoMessage* in,
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

  grpc::Status GetMany(const std::vector<std::string>& keys,
                       absl::Duration wait,
                       std::vector<std::string>* values = nullptr,
                       Token token = Token::kRight) {
    pb::GetManyRequest request;
    for (const std::string& key : keys) request.add_keys(key);
    request.set_timeout_ms(absl::ToInt64Milliseconds(wait));
    pb::GetManyResponse response;
    grpc::ClientContext context;
    Prepare(&context, token, wait + absl::Seconds(20));
    grpc::Status status = stub_->GetMany(&context, request, &response);
    if (values != nullptr) {
      values->assign(response.values().begin(), response.values().end());
    }
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

}  // namespace hvd::rendezvous_test

#endif  // HVD_CORE_RENDEZVOUS_RENDEZVOUS_SERVER_TEST_FIXTURE_H_
