#include "launcher/agent_conn.h"

#include <thread>
#include <utility>

#include "absl/strings/strip.h"

namespace hvd {
namespace launcher {

AgentConn::AgentConn(absl::Mutex* mu, grpc::ServerContext* context,
                     absl::Time now)
    : mu_(mu), context_(context), last_heard_(now) {}

std::string AgentConn::peer_ip() const {
  const std::string peer = context_->peer();
  absl::string_view p = peer;
  if (absl::ConsumePrefix(&p, "ipv4:")) {
    return std::string(p.substr(0, p.rfind(':')));
  }
  if (absl::ConsumePrefix(&p, "ipv6:[")) {
    p = p.substr(0, p.find(']'));
    absl::ConsumePrefix(&p, "::ffff:");
    return std::string(p);
  }
  return "";
}

void AgentConn::Queue(LauncherMessage m) { outbox_.push_back(std::move(m)); }

void AgentConn::Cancel() { context_->TryCancel(); }

void AgentConn::Close() {
  context_->TryCancel();
  stop_writer_ = true;
}

void AgentConn::Serve(Stream* stream,
                      absl::FunctionRef<void(const AgentMessage&)> on_message,
                      absl::FunctionRef<void()> on_ended) {
  std::thread writer([this, stream] { WriteLoop(stream); });
  AgentMessage m;
  while (stream->Read(&m)) {
    on_message(m);
    m.Clear();
  }
  {
    absl::MutexLock lock(mu_);
    on_ended();
    stop_writer_ = true;
  }
  writer.join();
}

void AgentConn::WriteLoop(Stream* stream) {
  while (true) {
    LauncherMessage m;
    {
      absl::MutexLock lock(mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
        return !outbox_.empty() || stop_writer_;
      };
      mu_->Await(absl::Condition(&ready));
      if (outbox_.empty()) return;
      m = std::move(outbox_.front());
      outbox_.pop_front();
    }
    if (!stream->Write(m)) return;  // broken: the reader sees it too
  }
}

}  // namespace launcher
}  // namespace hvd
