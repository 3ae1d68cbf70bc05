// The Context and Request implementations over a Core (see shm_context.h).
#ifndef HVD_CORE_TRANSPORT_SHM_SHM_CONTEXT_IMPL_H_
#define HVD_CORE_TRANSPORT_SHM_SHM_CONTEXT_IMPL_H_

#include <memory>
#include <string>

#include "core/transport/shm/channel.h"
#include "core/transport/shm/core.h"
#include "core/transport/transport.h"

namespace hvd::transport::shm_internal {

// Keeps the Core alive.
class ShmRequest final : public Request {
 public:
  ShmRequest(std::shared_ptr<Core> core, std::shared_ptr<Op> op)
      : core_(std::move(core)), op_(std::move(op)) {}
  ShmRequest(const ShmRequest&) = delete;
  ShmRequest& operator=(const ShmRequest&) = delete;

  absl::Status Wait(absl::Time deadline) override;
  bool Done() override { return core_->Poll(*op_); }

 private:
  const std::shared_ptr<Core> core_;
  const std::shared_ptr<Op> op_;
};

// Thread-safe. Destruction cancels pending requests.
class ShmContext final : public Context {
 public:
  explicit ShmContext(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~ShmContext() override { core_->Close(); }
  ShmContext(const ShmContext&) = delete;
  ShmContext& operator=(const ShmContext&) = delete;

  int rank() const override { return core_->rank(); }
  int size() const override { return core_->size(); }
  std::unique_ptr<Request> Send(int peer, const void* data,
                                size_t len) override;
  std::unique_ptr<Request> Recv(int peer, void* data, size_t len) override;
  std::unique_ptr<Request> RecvStreaming(int peer, void* data,
                                         size_t len) override;
  // Reduces straight out of the ring: every peer of the context can.
  bool ReducesOnReceive(int peer) const override { return true; }
  std::unique_ptr<Request> RecvReduce(int peer, size_t len,
                                      ReceiveReducer reducer) override;
  std::unique_ptr<Request> RecvAny(int peer, std::string* out) override;
  void Abort(absl::Status reason) override;
  absl::Status status() const override { return core_->status(); }
  std::string PeerAddress(int peer) const override;

 private:
  std::unique_ptr<Request> Post(std::shared_ptr<Op> op);

  const std::shared_ptr<Core> core_;
};

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_SHM_CONTEXT_IMPL_H_
