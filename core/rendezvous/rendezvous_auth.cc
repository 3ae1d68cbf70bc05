#include "core/rendezvous/rendezvous_auth.h"

#include <utility>
#include <vector>

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <grpcpp/impl/codegen/service_type.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/common/logging.h"
#include "proto/job_token.h"

namespace hvd {
namespace rendezvous_internal {
namespace {

using MethodTable =
    std::vector<std::unique_ptr<grpc::internal::RpcServiceMethod>>;

// grpc::Service keeps its methods private (only grpc::Server may see them).
// An explicit instantiation may name a private member (C++20 [temp.spec]
// p6); the friend it defines hands that member pointer out.
MethodTable& MethodsOf(grpc::Service& service);
template <MethodTable grpc::Service::*kMember>
struct MethodTableAccess {
  friend MethodTable& MethodsOf(grpc::Service& service) {
    return service.*kMember;
  }
};
template struct MethodTableAccess<&grpc::Service::methods_>;

}  // namespace

// The rejection warnings: the first at once, then at most one per interval.
class RejectionLog {
 public:
  explicit RejectionLog(absl::Duration interval) : interval_(interval) {}
  ~RejectionLog() { Flush(); }

  void Rejected(absl::string_view method, absl::string_view peer) {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    latest_ = absl::StrCat(method, " from ", peer);
    ++unreported_;
    if (now < next_report_) return;
    next_report_ = now + interval_;
    ReportLocked();
  }

  void Flush() {
    absl::MutexLock lock(&mu_);
    if (unreported_ > 0) ReportLocked();
  }

 private:
  void ReportLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (unreported_ == 1) {
      HVD_LOG(WARNING) << "rendezvous: rejected " << latest_ << ": "
                       << kTokenRejection;
    } else {
      HVD_LOG(WARNING) << "rendezvous: rejected " << unreported_
                       << " calls with a " << kTokenRejection << " (latest: "
                       << latest_ << ")";
    }
    unreported_ = 0;
  }

  const absl::Duration interval_;
  absl::Mutex mu_;
  absl::Time next_report_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t unreported_ ABSL_GUARDED_BY(mu_) = 0;
  std::string latest_ ABSL_GUARDED_BY(mu_);
};

TokenCheck::TokenCheck(std::string token, absl::Duration log_interval)
    : token_(std::move(token)),
      log_(std::make_unique<RejectionLog>(log_interval)) {}

TokenCheck::~TokenCheck() = default;

bool TokenCheck::Admits(const grpc::ServerContextBase& context,
                        absl::string_view method) const {
  const auto& metadata = context.client_metadata();
  auto [first, last] = metadata.equal_range(rendezvous::kJobTokenMetadataKey);
  if (first != last && std::next(first) == last &&
      rendezvous::JobTokenMatches(
          absl::string_view(first->second.data(), first->second.size()),
          token_)) {
    return true;
  }
  log_->Rejected(method, context.peer());
  return false;
}

namespace {

// Whether gRPC reads a method's request before running its handler.
bool PreReadsRequest(grpc::internal::RpcMethod::RpcType type) {
  return type == grpc::internal::RpcMethod::NORMAL_RPC ||
         type == grpc::internal::RpcMethod::SERVER_STREAMING;
}

// Reads the one request message of a unary or server-streaming call as raw
// bytes, for `handler` to parse; nullptr with `status` set when none came.
void* ReadRequest(const grpc::internal::MethodHandler::HandlerParameter& param,
                  grpc::internal::MethodHandler* handler, grpc::Status* status,
                  void** handler_data) {
  grpc::ByteBuffer message;
  grpc::internal::ServerReaderWriterBody<grpc::ByteBuffer, grpc::ByteBuffer>
      stream(param.call, static_cast<grpc::ServerContext*>(param.server_context));
  std::vector<grpc::Slice> slices;
  if (!stream.Read(&message) || !message.Dump(&slices).ok()) {
    *status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "the call carried no request message");
    return nullptr;
  }
  std::vector<grpc_slice> raw;
  raw.reserve(slices.size());
  for (const grpc::Slice& slice : slices) raw.push_back(slice.c_slice());
  grpc_byte_buffer* payload =
      grpc_raw_byte_buffer_create(raw.data(), raw.size());
  for (grpc_slice& slice : raw) grpc_slice_unref(slice);
  return handler->Deserialize(param.call->call(), payload, status,
                              handler_data);
}

// Runs the original handler only for calls that present the token.
//
// The wrapper is registered as a bidirectional-streaming method, so gRPC
// hands it the call with the client's metadata but without reading any
// request message: the token is checked first, and a rejected call's body
// is never read or parsed (it is bounded by HTTP/2 flow control and dropped
// with the stream). For an accepted unary or server-streaming call the
// wrapper reads the one message itself and the original handler parses it,
// exactly as without the guard; streaming-request handlers read their own.
class TokenCheckingHandler : public grpc::internal::MethodHandler {
 public:
  TokenCheckingHandler(std::unique_ptr<grpc::internal::RpcServiceMethod> inner,
                       std::shared_ptr<const TokenCheck> check)
      : inner_(std::move(inner)),
        reads_request_(PreReadsRequest(inner_->method_type())),
        check_(std::move(check)) {}

  std::unique_ptr<grpc::internal::RpcServiceMethod> ReleaseInner() {
    return std::move(inner_);
  }

  void RunHandler(const HandlerParameter& param) override {
    if (!check_->Admits(*param.server_context, inner_->name())) {
      rejecter_.RunHandler(param);
      return;
    }
    grpc::internal::MethodHandler* handler = inner_->handler();
    grpc::Status status;
    void* request = nullptr;
    void* data = nullptr;
    if (reads_request_) {
      request = ReadRequest(param, handler, &status, &data);
    }
    handler->RunHandler(HandlerParameter(param.call, param.server_context,
                                         request, status, data,
                                         param.call_requester));
  }

 private:
  std::unique_ptr<grpc::internal::RpcServiceMethod> inner_;
  const bool reads_request_;
  std::shared_ptr<const TokenCheck> check_;
  grpc::internal::ErrorMethodHandler<grpc::StatusCode::UNAUTHENTICATED>
      rejecter_{kTokenRejection};
};

}  // namespace

struct TokenGuard::Guarded {
  grpc::Service* service;
  std::vector<size_t> indices;  // of the wrapped entries in its method table
};

TokenGuard::TokenGuard(std::shared_ptr<const TokenCheck> check)
    : check_(std::move(check)) {}

TokenGuard::~TokenGuard() {
  for (Guarded& g : guarded_) {
    MethodTable& methods = MethodsOf(*g.service);
    for (size_t i : g.indices) {
      auto* wrapper = static_cast<TokenCheckingHandler*>(methods[i]->handler());
      methods[i] = wrapper->ReleaseInner();
    }
  }
}

absl::Status TokenGuard::Guard(grpc::Service* service) {
  MethodTable& methods = MethodsOf(*service);
  using ApiType = grpc::internal::RpcServiceMethod::ApiType;
  for (const auto& method : methods) {
    if (method == nullptr) continue;  // generic: unroutable without one
    if (method->api_type() != ApiType::SYNC || method->handler() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rendezvous server: method ", method->name(),
          " uses the async or callback API; the job-token check covers "
          "synchronous methods only"));
    }
  }
  Guarded guarded{service, {}};
  for (size_t i = 0; i < methods.size(); ++i) {
    if (methods[i] == nullptr) continue;
    const char* name = methods[i]->name();
    auto* wrapper =
        new TokenCheckingHandler(std::move(methods[i]), check_);
    // Streaming-request registration: gRPC reads no message before the
    // wrapper has checked the token (see TokenCheckingHandler).
    methods[i] = std::make_unique<grpc::internal::RpcServiceMethod>(
        name, grpc::internal::RpcMethod::BIDI_STREAMING, wrapper);
    guarded.indices.push_back(i);
  }
  guarded_.push_back(std::move(guarded));
  return absl::OkStatus();
}

}  // namespace rendezvous_internal
}  // namespace hvd
