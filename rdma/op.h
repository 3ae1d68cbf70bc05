// The state of one posted send or receive, shared by the Request the caller
// holds and the Engine that moves its bytes. Transfer fields are guarded by
// the Engine's lock; completion is published once through `done_` (read
// lock-free by Done()) and `mu_` (waiters sleep on it).
#ifndef HVD_RDMA_OP_H_
#define HVD_RDMA_OP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/transport/op_kind.h"
#include "rdma/registration_cache.h"
#include "rdma/wire.h"

namespace hvd::rdma {

// One fi_write of a send: a local range and where it lands.
struct Piece {
  size_t offset;  // into the message
  size_t len;
  void* desc;     // local descriptor
  uint64_t remote_addr;
  uint64_t key;
};

class Op {
 public:
  using Kind = ::hvd::transport::OpKind;

  Op(Kind kind, int peer, char* data, size_t len, std::string* out)
      : kind_(kind), peer_(peer), data_(data), len_(len), out_(out) {}
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  Kind kind() const { return kind_; }
  int peer() const { return peer_; }
  size_t len() const { return len_; }

  bool done() const { return done_.load(std::memory_order_acquire); }
  // Records the result, drops the registrations and wakes every waiter;
  // later calls are ignored.
  void Complete(absl::Status status) {
    absl::MutexLock lock(&mu_);
    if (done()) return;
    status_ = std::move(status);
    regs.clear();
    done_.store(true, std::memory_order_release);
  }
  // Blocks until done or `deadline`; true if done.
  bool AwaitDone(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto is_done = [this] { return done(); };
    mu_.AwaitWithDeadline(absl::Condition(&is_done), deadline);
    return done();
  }
  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  size_t bytes_done() const {
    return bytes_done_.load(std::memory_order_relaxed);
  }
  void set_bytes_done(size_t n) {
    bytes_done_.store(n, std::memory_order_relaxed);
  }

  // ---- transfer state: Engine lock held ------------------------------------
  char* data() const { return data_; }
  std::string* out() const { return out_; }
  // RecvAny: the announced length is known; the payload goes into *out.
  void SetAnyLength(size_t len) {
    out_->resize(len);
    data_ = out_->data();
    len_ = len;
  }

  uint16_t seq = 0;
  bool started = false;        // send: matched with an advert
  std::vector<std::shared_ptr<Registration>> regs;  // local pieces, in order
  std::vector<Piece> pieces;   // send: the writes
  size_t pieces_posted = 0;
  size_t pieces_done = 0;

 private:
  const Kind kind_;
  const int peer_;
  char* data_;
  size_t len_;
  std::string* const out_;
  std::atomic<size_t> bytes_done_{0};

  std::atomic<bool> done_{false};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::rdma

#endif  // HVD_RDMA_OP_H_
