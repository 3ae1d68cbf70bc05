// The Context and Request implementations over a Core (see tcp_context.h for
// the design).
#ifndef HVD_CORE_TRANSPORT_TCP_TCP_CONTEXT_IMPL_H_
#define HVD_CORE_TRANSPORT_TCP_TCP_CONTEXT_IMPL_H_

#include <memory>
#include <string>

#include "core/transport/tcp/context_core.h"
#include "core/transport/tcp/op.h"
#include "core/transport/transport.h"

namespace hvd::transport::tcp_internal {

// Wait() polls the op's pair for up to Tuning::spin, then has the io thread
// watch everything unwatched and sleeps. Keeps the Core alive.
class TcpRequest final : public Request {
 public:
  // `pair` is owned by `core`; nullptr when `op` is already complete.
  TcpRequest(std::shared_ptr<Core> core, std::shared_ptr<Op> op, Pair* pair);
  TcpRequest(const TcpRequest&) = delete;
  TcpRequest& operator=(const TcpRequest&) = delete;

  absl::Status Wait(absl::Time deadline) override;
  bool Done() override;

 private:
  absl::Status DeadlineError() const;

  const std::shared_ptr<Core> core_;
  const std::shared_ptr<Op> op_;
  Pair* const pair_;
};

// Thread-safe. Destruction stops the io thread and cancels pending requests.
class TcpContext final : public Context {
 public:
  explicit TcpContext(std::shared_ptr<Core> core);  // core already started
  ~TcpContext() override;
  TcpContext(const TcpContext&) = delete;
  TcpContext& operator=(const TcpContext&) = delete;

  int rank() const override { return core_->rank(); }
  int size() const override { return core_->size(); }
  std::unique_ptr<Request> Send(int peer, const void* data,
                                size_t len) override;
  std::unique_ptr<Request> Recv(int peer, void* data, size_t len) override;
  std::unique_ptr<Request> RecvAny(int peer, std::string* out) override;
  void Abort(absl::Status reason) override;
  absl::Status status() const override;
  std::string PeerAddress(int peer) const override;

 private:
  // Posts `op` to its peer's pair, or fails it if the peer is not valid.
  std::unique_ptr<Request> Post(std::shared_ptr<Op> op, bool watch);

  const std::shared_ptr<Core> core_;
};

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_TCP_CONTEXT_IMPL_H_
