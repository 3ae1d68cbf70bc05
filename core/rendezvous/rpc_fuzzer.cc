// Fuzzes the rendezvous server's RPC handlers with requests built from the
// input, over real gRPC on loopback, as a worker holding the job token
// could send them: one server for the whole run (so state builds up across
// inputs, against deliberately small limits), and each input a sequence of
// calls. Input: repeated [method byte][length byte][request bytes]; the
// request bytes are parsed as that method's protobuf message (unparsable
// ones are sent empty). Waits are forced to zero so that no call blocks.
#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/rendezvous/rendezvous_server.h"
#include "proto/job_token.h"
#include "proto/rendezvous.grpc.pb.h"

namespace {

namespace pb = ::hvd::rendezvous;
constexpr char kToken[] = "rpc-fuzzer-token-0123456789abcdef";

struct Fixture {
  Fixture() {
    hvd::RendezvousServerOptions options;
    options.address = "127.0.0.1:0";
    options.token = kToken;
    options.size = 4;
    options.limits.max_store_bytes = 1 << 20;
    options.limits.max_blocked_calls = 2;
    server = std::make_unique<hvd::RendezvousServer>(options);
    if (!server->Start().ok()) __builtin_trap();
    stub = pb::Rendezvous::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                            grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<hvd::RendezvousServer> server;
  std::unique_ptr<pb::Rendezvous::Stub> stub;
};

void Prepare(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  context->AddMetadata(hvd::rendezvous::kJobTokenMetadataKey, kToken);
}

template <typename Request>
Request Parse(const std::string& bytes) {
  Request request;
  if (!request.ParseFromString(bytes)) request.Clear();
  return request;
}

void Call(pb::Rendezvous::Stub& stub, uint8_t method,
          const std::string& bytes) {
  grpc::ClientContext context;
  Prepare(&context);
  switch (method % 5) {
    case 0: {
      auto request = Parse<pb::RegisterRequest>(bytes);
      pb::RegisterResponse response;
      stub.Register(&context, request, &response);
      break;
    }
    case 1: {
      auto request = Parse<pb::SetRequest>(bytes);
      pb::SetResponse response;
      stub.Set(&context, request, &response);
      break;
    }
    case 2: {
      auto request = Parse<pb::GetRequest>(bytes);
      request.set_timeout_ms(0);
      pb::GetResponse response;
      stub.Get(&context, request, &response);
      break;
    }
    case 3: {
      auto request = Parse<pb::BarrierRequest>(bytes);
      request.set_timeout_ms(0);
      pb::BarrierResponse response;
      stub.Barrier(&context, request, &response);
      break;
    }
    default: {
      auto request = Parse<pb::GetManyRequest>(bytes);
      request.set_timeout_ms(0);
      pb::GetManyResponse response;
      stub.GetMany(&context, request, &response);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* fixture = new Fixture();
  size_t at = 0;
  while (at + 2 <= size) {
    const uint8_t method = data[at];
    const size_t length = std::min<size_t>(data[at + 1], size - at - 2);
    const std::string bytes(reinterpret_cast<const char*>(data) + at + 2,
                            length);
    Call(*fixture->stub, method, bytes);
    at += 2 + length;
  }
  if (fixture->server->BlockedCalls() != 0) __builtin_trap();  // none waits
  return 0;
}
