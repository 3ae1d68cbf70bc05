// For tests: a data plane that passes every call to another; tests derive
// from it and override what they change.
#ifndef HVD_CORE_TRANSPORT_FORWARDING_CONTEXT_H_
#define HVD_CORE_TRANSPORT_FORWARDING_CONTEXT_H_

#include <memory>
#include <string>
#include <utility>

#include "core/transport/transport.h"

namespace hvd::transport {

// RecvStreaming and RecvReduce are not forwarded: a streamed receive falls
// back to Recv and the context does not reduce on receive (the interface's
// defaults), so an override of Recv sees every receive. A test that counts
// streamed or reduced receives overrides those and calls inner().
class ForwardingContext : public Context {
 public:
  // Owns `inner`.
  explicit ForwardingContext(std::unique_ptr<Context> inner)
      : owned_(std::move(inner)), inner_(*owned_) {}
  // `inner` outlives this context.
  explicit ForwardingContext(Context& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::unique_ptr<Request> Send(int peer, const void* data,
                                size_t len) override {
    return inner_.Send(peer, data, len);
  }
  std::unique_ptr<Request> Recv(int peer, void* data, size_t len) override {
    return inner_.Recv(peer, data, len);
  }
  std::unique_ptr<Request> RecvAny(int peer, std::string* out) override {
    return inner_.RecvAny(peer, out);
  }
  void Abort(absl::Status reason) override { inner_.Abort(reason); }
  absl::Status status() const override { return inner_.status(); }
  std::string PeerAddress(int peer) const override {
    return inner_.PeerAddress(peer);
  }

 protected:
  Context& inner() { return inner_; }
  const Context& inner() const { return inner_; }

 private:
  std::unique_ptr<Context> owned_;
  Context& inner_;
};

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_FORWARDING_CONTEXT_H_
