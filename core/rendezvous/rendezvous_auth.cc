#include "core/rendezvous/rendezvous_auth.h"

#include <utility>

#include <grpcpp/impl/codegen/service_type.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/method_handler.h>

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

constexpr char kRejection[] = "missing or wrong job token";

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
                       << kRejection;
    } else {
      HVD_LOG(WARNING) << "rendezvous: rejected " << unreported_
                       << " calls with a " << kRejection << " (latest: "
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

namespace {

bool Authenticated(const grpc::ServerContextBase& context,
                   absl::string_view token) {
  const auto& metadata = context.client_metadata();
  auto [first, last] = metadata.equal_range(rendezvous::kJobTokenMetadataKey);
  if (first == last || std::next(first) != last) return false;
  return rendezvous::JobTokenMatches(absl::string_view(first->second.data(),
                                           first->second.size()),
                         token);
}

// Runs the original handler only for calls that present the token.
//
// The request payload of unary and server-streaming calls arrives before the
// handler runs; Deserialize keeps it as raw bytes, so a rejected call never
// parses attacker-chosen input and leaks nothing, and an accepted one is
// parsed by the original handler exactly as without the guard.
class TokenCheckingHandler : public grpc::internal::MethodHandler {
 public:
  TokenCheckingHandler(std::unique_ptr<grpc::internal::RpcServiceMethod> inner,
                       std::shared_ptr<const std::string> token,
                       std::shared_ptr<RejectionLog> log)
      : inner_(std::move(inner)),
        token_(std::move(token)),
        log_(std::move(log)) {}

  std::unique_ptr<grpc::internal::RpcServiceMethod> ReleaseInner() {
    return std::move(inner_);
  }

  void* Deserialize(grpc_call* /*call*/, grpc_byte_buffer* request,
                    grpc::Status* /*status*/, void** /*data*/) override {
    return request;
  }

  void RunHandler(const HandlerParameter& param) override {
    auto* payload = static_cast<grpc_byte_buffer*>(param.request);
    if (!Authenticated(*param.server_context, *token_)) {
      log_->Rejected(inner_->name(), param.server_context->peer());
      grpc::Status ignored;
      rejecter_.Deserialize(param.call->call(), payload, &ignored, nullptr);
      rejecter_.RunHandler(param);
      return;
    }
    grpc::internal::MethodHandler* handler = inner_->handler();
    grpc::Status status;
    void* request = nullptr;
    void* data = nullptr;
    if (payload != nullptr) {
      request = handler->Deserialize(param.call->call(), payload, &status, &data);
    }
    handler->RunHandler(HandlerParameter(param.call, param.server_context,
                                         request, status, data,
                                         param.call_requester));
  }

 private:
  std::unique_ptr<grpc::internal::RpcServiceMethod> inner_;
  std::shared_ptr<const std::string> token_;
  std::shared_ptr<RejectionLog> log_;
  grpc::internal::ErrorMethodHandler<grpc::StatusCode::UNAUTHENTICATED>
      rejecter_{kRejection};
};

}  // namespace

struct TokenGuard::Guarded {
  grpc::Service* service;
  std::vector<size_t> indices;  // of the wrapped entries in its method table
};

TokenGuard::TokenGuard(std::string token, absl::Duration log_interval)
    : token_(std::make_shared<const std::string>(std::move(token))),
      log_(std::make_shared<RejectionLog>(log_interval)) {}

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
    const auto type = methods[i]->method_type();
    auto* wrapper =
        new TokenCheckingHandler(std::move(methods[i]), token_, log_);
    methods[i] =
        std::make_unique<grpc::internal::RpcServiceMethod>(name, type, wrapper);
    guarded.indices.push_back(i);
  }
  guarded_.push_back(std::move(guarded));
  return absl::OkStatus();
}

}  // namespace rendezvous_internal
}  // namespace hvd
