// A call to the rendezvous server's own service: admission, parsing,
// answering, and the waiting of calls that cannot be answered at once.
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/rendezvous/rendezvous_server_impl.h"

namespace hvd {
namespace {

namespace pb = ::hvd::rendezvous;

// A call answered without being read.
class Refusal final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerGenericBidiReactor* RendezvousServer::Impl::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (!check_->Admits(*context, context->method())) {
    return new Refusal(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                    rendezvous_internal::kTokenRejection));
  }
  Method method = MethodOf(context->method());
  if (method == nullptr) {
    return new Refusal(grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        absl::StrCat("the rendezvous server has no method ",
                     rendezvous_internal::Quote(context->method()))));
  }
  return new Call(this, context, method);
}

RendezvousServer::Impl::Method RendezvousServer::Impl::MethodOf(
    absl::string_view path) {
  if (!absl::ConsumePrefix(&path, "/") ||
      !absl::ConsumePrefix(&path, pb::Rendezvous::service_full_name()) ||
      !absl::ConsumePrefix(&path, "/")) {
    return nullptr;
  }
  if (path == "Register") {
    return &ParseAndRun<pb::RegisterRequest, pb::RegisterResponse,
                        &Impl::Register>;
  }
  if (path == "Set") {
    return &ParseAndRun<pb::SetRequest, pb::SetResponse, &Impl::Set>;
  }
  if (path == "Get") {
    return &ParseAndRun<pb::GetRequest, pb::GetResponse, &Impl::Get>;
  }
  if (path == "GetMany") {
    return &ParseAndRun<pb::GetManyRequest, pb::GetManyResponse,
                        &Impl::GetMany>;
  }
  if (path == "Barrier") {
    return &ParseAndRun<pb::BarrierRequest, pb::BarrierResponse,
                        &Impl::Barrier>;
  }
  return nullptr;
}

template <typename Request, typename Response,
          void (RendezvousServer::Impl::*kMethod)(
              RendezvousServer::Impl::Call&, const Request&)>
void RendezvousServer::Impl::ParseAndRun(Impl& impl, Call& call,
                                         grpc::ByteBuffer& bytes) {
  call.set_response(std::make_unique<Response>());
  Request request;
  if (!grpc::GenericDeserialize<grpc::ProtoBufferReader, Request>(&bytes,
                                                                  &request)
           .ok()) {
    call.Answer(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("the request is not a ", Request::descriptor()->name())));
    return;
  }
  (impl.*kMethod)(call, request);
}

void RendezvousServer::Impl::Call::OnReadDone(bool ok) {
  Order();
  if (!ok) {
    Answer(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the call carried no request message"));
    return;
  }
  method_(*impl_, *this, request_);
}

void RendezvousServer::Impl::Call::OnCancel() {
  Order();
  bool was_waiting;
  {
    absl::MutexLock lock(&impl_->mu_);
    was_waiting = impl_->UnfileLocked(*this);
  }
  if (was_waiting) {
    Answer(grpc::Status(grpc::StatusCode::CANCELLED,
                        "the client cancelled the call"));
  }
}

void RendezvousServer::Impl::Call::Answer(const grpc::Status& status) {
  grpc::Status answer = status;
  bool own_buffer = false;
  if (answer.ok()) {
    answer = grpc::GenericSerialize<grpc::ProtoBufferWriter,
                                    google::protobuf::Message>(
        *response_, &reply_, &own_buffer);
  }
  Order();
  if (answer.ok()) {
    StartWriteAndFinish(&reply_, grpc::WriteOptions(), answer);
  } else {
    Finish(answer);
  }
}

void RendezvousServer::Impl::Call::OnDone() {
  Order();
  delete this;
}

std::optional<grpc::Status> RendezvousServer::Impl::WaitLocked(Call& call,
                                                               Wait wait) {
  if (wait.ready()) return grpc::Status::OK;
  if (shutting_down_) return ShuttingDown();
  if (call.context().IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the client cancelled the call");
  }
  if (wait.wait <= absl::ZeroDuration()) return wait.expired();
  if (grpc::Status s = CheckCanBlock(); !s.ok()) return s;
  // No point waiting past the client's own deadline.
  absl::Time deadline = absl::Now() + wait.wait;
  const auto client_deadline = call.context().deadline();
  if (client_deadline != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(deadline, absl::FromChrono(client_deadline));
  }
  const std::string topic = wait.topic();
  call.wait = std::move(wait);
  call.waiting = true;
  call.by_topic = waiters_.emplace(topic, &call);
  call.by_deadline = deadlines_.emplace(deadline, &call);
  if (call.by_deadline == deadlines_.begin()) timer_wake_.Signal();
  ++blocked_;
  return std::nullopt;
}

bool RendezvousServer::Impl::UnfileLocked(Call& call) {
  if (!call.waiting) return false;
  waiters_.erase(call.by_topic);
  deadlines_.erase(call.by_deadline);
  call.waiting = false;
  --blocked_;
  return true;
}

void RendezvousServer::Impl::AnswerOrWait(Call& call, Wait wait) {
  std::optional<grpc::Status> now;
  {
    absl::MutexLock lock(&mu_);
    now = WaitLocked(call, std::move(wait));
  }
  if (now) call.Answer(*now);
}

void RendezvousServer::Impl::WakeLocked(const std::string& topic,
                                        Answers& answers) {
  auto [begin, end] = waiters_.equal_range(topic);
  std::vector<Call*> woken;
  for (auto it = begin; it != end; ++it) woken.push_back(it->second);
  for (Call* call : woken) {
    if (call->wait.ready()) {
      UnfileLocked(*call);
      answers.emplace_back(call, grpc::Status::OK);
    } else {
      waiters_.erase(call->by_topic);
      call->by_topic = waiters_.emplace(call->wait.topic(), call);
    }
  }
}

void RendezvousServer::Impl::Deliver(const Answers& answers) {
  for (const auto& [call, status] : answers) call->Answer(status);
}

void RendezvousServer::Impl::ExpireWaits() {
  while (true) {
    Answers expired;
    {
      absl::MutexLock lock(&mu_);
      if (timer_stop_) return;
      const absl::Time now = absl::Now();
      while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        Call* call = deadlines_.begin()->second;
        grpc::Status status = call->wait.expired();
        UnfileLocked(*call);
        expired.emplace_back(call, std::move(status));
      }
      if (expired.empty()) {
        timer_wake_.WaitWithDeadline(&mu_, deadlines_.empty()
                                               ? absl::InfiniteFuture()
                                               : deadlines_.begin()->first);
        continue;
      }
    }
    Deliver(expired);
  }
}

}  // namespace hvd
