#include "core/transport/shm/core.h"

#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/cpu_relax.h"
#include "core/common/logging.h"
#include "core/common/thread_role.h"
#include "core/transport/shm/futex.h"

namespace hvd::transport::shm_internal {
namespace {

constexpr int64_t kLivenessMs = 100;
constexpr int64_t kHelperDelayUs = 50;
// A waiter polls without yielding this long after the last byte moved: a
// peer on another CPU answers a small message within it, and a yield is a
// system call (about a microsecond here) each time.
constexpr absl::Duration kRelaxSpin = absl::Microseconds(5);

bool ProcessGone(int pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

Tuning TuningFrom(const ShmTuning& options) {
  Tuning t;
  t.spin = options.spin;
  t.piece_bytes = RoundUp(std::max<size_t>(options.piece_bytes, 1), kSlot);
  t.ring_bytes =
      std::max(RoundUp(std::max<size_t>(options.ring_bytes, 1), kSlot),
               2 * kSlot);
  t.liveness_interval = absl::Milliseconds(kLivenessMs);
  t.helper_delay = absl::Microseconds(kHelperDelayUs);
  t.yield = options.yield;
  t.slow_copy_mbps = options.slow_copy_mbps;
  return t;
}

Core::Core(int rank, int size, Tuning tuning, std::unique_ptr<Segment> own)
    : rank_(rank),
      size_(size),
      tuning_(tuning),
      own_(std::move(own)),
      header_(reinterpret_cast<SegmentHeader*>(own_->data())),
      by_rank_(size) {}

Core::~Core() { Close(); }

void Core::AddPeer(int peer, std::unique_ptr<Segment> segment,
                   uint32_t num_rings, size_t ring_bytes, uint32_t index_there,
                   uint32_t index_here) {
  auto p = std::make_unique<Peer>();
  p->rank = peer;
  p->header = reinterpret_cast<SegmentHeader*>(segment->data());
  auto ring_in = [num_rings](char* base, size_t bytes, uint32_t index) {
    Ring ring;
    ring.header = reinterpret_cast<RingHeader*>(
        base + kRingHeadersOffset + index * sizeof(RingHeader));
    ring.data = base + RingDataOffset(num_rings, bytes, index);
    ring.bytes = bytes;
    return ring;
  };
  // Of the peer's segment this rank maps the header and the ring headers
  // now (the owner reserved them at creation). Its own ring there is
  // reserved, and its pages fault in, as it first writes them: a rank
  // writes bulk data to few of its local peers, its ring neighbours, and
  // reserving or mapping a whole ring in every peer's segment at start-up
  // cost (local ranks - 1) rings of memory and page tables per rank.
  segment->Prefault(0, HeadersBytes(num_rings));
  p->send = std::make_unique<SendChannel>(
      ring_in(segment->data(), ring_bytes, index_there), p->header,
      tuning_.piece_bytes, tuning_.slow_copy_mbps,
      RingReservation(segment.get(),
                      RingDataOffset(num_rings, ring_bytes, index_there),
                      ring_bytes, peer));
  p->recv = std::make_unique<RecvChannel>(
      ring_in(own_->data(), tuning_.ring_bytes, index_here), p->header,
      tuning_.piece_bytes, rank_, peer);
  p->segment = std::move(segment);
  peers_.push_back(p.get());
  by_rank_[peer] = std::move(p);
}

SendChannel::Reserve Core::RingReservation(const Segment* segment,
                                           size_t offset, size_t bytes,
                                           int peer) const {
  return [segment, offset, bytes, peer, rank = rank_](
             size_t from, size_t n) -> absl::Status {
    absl::Status s = segment->Reserve(offset + from, n);
    if (s.ok()) return s;
    return absl::Status(
        s.code(),
        absl::StrCat("rank ", rank, ": cannot reserve ", n, " more bytes of ",
                     "its ", bytes, "-byte shared-memory ring to rank ", peer,
                     " in /dev/shm (", s.message(),
                     "); enlarge /dev/shm (e.g. docker run --shm-size), "
                     "make HVD_SHM_RING_BYTES smaller, or set HVD_SHM=0 to "
                     "connect the ranks of a host over the network"));
  };
}

void Core::Start() {
  if (peers_.empty()) return;
  helper_ = std::thread([this] {
    NameThisThread("hvd-shm-helper");
    // Nudged whenever a peer's ring fills while no thread of ours polls,
    // which in a large collective is mostly between two of our thread's
    // waits: woken at once, it would preempt that thread only to find it
    // polling again.
    StandByWithoutPreempting();
    HelperLoop();
  });
}

bool Core::connected(int peer) const {
  return peer >= 0 && peer < size_ && by_rank_[peer] != nullptr;
}

int Core::peer_pid(int peer) const {
  return connected(peer) ? by_rank_[peer]->header->pid : -1;
}

void Core::Post(const std::shared_ptr<Op>& op) {
  if (!connected(op->peer())) {
    op->Complete(absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": ", op->is_send() ? "Send to" : "Receive from",
        " rank ", op->peer(),
        ", which is not connected to this rank through shared memory (size-",
        size_, " context)")));
    return;
  }
  Peer& peer = *by_rank_[op->peer()];
  absl::Status failure;
  const int result = op->is_send() ? peer.send->Post(op, &failure)
                                   : peer.recv->Post(op, &failure);
  if (!failure.ok()) Detected(failure);
  if (result & kCompleted) RingBell(&header_->bell);
}

int Core::ProgressAll() {
  int result = kNothing;
  for (Peer* p : peers_) {
    absl::Status send_failure, recv_failure;
    result |= p->send->Progress(&send_failure);
    if (!send_failure.ok()) Detected(send_failure);
    result |= p->recv->Progress(&recv_failure);
    if (!recv_failure.ok()) Detected(recv_failure);
  }
  // Another thread of ours may sleep on an op we completed.
  if (result & kCompleted) RingBell(&header_->bell);
  return result;
}

bool Core::Poll(const Op& op) {
  if (op.done()) return true;
  ProgressAll();
  CheckPeers(false);
  return op.done();
}

bool Core::Wait(const Op& op, absl::Time deadline) {
  if (op.done()) return true;
  PollUntil([&op] { return op.done(); }, deadline);
  return op.done();
}

bool Core::StuckWork() const {
  for (const Peer* p : peers_) {
    if (p->send->can_progress() || p->recv->writer_stuck()) return true;
  }
  return false;
}

template <typename Done>
void Core::PollUntil(const Done& done, absl::Time deadline) {
  std::atomic<uint32_t>& pollers = header_->pollers;
  pollers.fetch_add(1, std::memory_order_seq_cst);
  absl::Time now = absl::Now();
  absl::Time spin_end = now + tuning_.spin;
  absl::Time relax_end = now + kRelaxSpin;
  for (unsigned iteration = 1;; ++iteration) {
    const int progressed = ProgressAll();
    if (done()) break;
    if (iteration % 64 == 0) CheckPeers(false);
    now = absl::Now();
    if (now >= deadline) break;
    if (progressed & kMoved) {
      spin_end = now + tuning_.spin;
      relax_end = now + kRelaxSpin;
      continue;
    }
    if (now < spin_end) {
      // Yield rather than only pause, after the first microseconds (in
      // which a peer that is running answers): with as many busy threads as
      // cores (two ranks, each with a framework thread and a background
      // thread, on two cores) a pure spinner would keep the thread we wait
      // for off the CPU until its time slice ends.
      if (tuning_.yield && now >= relax_end) {
        sched_yield();
      } else {
        CpuRelax();
      }
      continue;
    }
    if (progressed & kBusy) {  // Whoever holds it may miss our bytes.
      sched_yield();
      continue;
    }
    // Sleep until somebody rings our bell. Count ourselves first, then look
    // once more: a waker either sees us counted or we see its change.
    Doorbell& bell = header_->bell;
    bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t seq = bell.seq.load(std::memory_order_seq_cst);
    const int again = ProgressAll();
    CheckPeers(false);
    bool quiet = false;
    if (!done() && again == kNothing) {
      const absl::Duration slice =
          std::min(deadline - now, tuning_.liveness_interval);
      FutexWait(&bell.seq, seq, slice);
      quiet = bell.seq.load(std::memory_order_relaxed) == seq;
    }
    bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (quiet) CheckPeers(true);  // Nobody rang for a while: still alive?
    spin_end = absl::Now() + tuning_.spin;
  }
  // The last poller out leaves nobody to move bytes a peer waits for: hand
  // them to the helper (a peer that nudges from now on sees no poller).
  if (pollers.fetch_sub(1, std::memory_order_seq_cst) == 1 && StuckWork()) {
    header_->helper_seq.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&header_->helper_seq);
  }
}

void Core::HelperLoop() {
  std::atomic<uint32_t>& word = header_->helper_seq;
  std::atomic<uint32_t>& pollers = header_->pollers;
  while (!helper_stop_.load(std::memory_order_acquire)) {
    const uint32_t seq = word.load(std::memory_order_seq_cst);
    if (StuckWork()) {
      // A thread that just left a wait usually waits again within
      // microseconds (the next receive of a ring): give it that chance
      // rather than copy beside it, which on a machine with as many busy
      // threads as cores only takes CPU from it.
      FutexWait(&word, seq, tuning_.helper_delay);
      if (pollers.load(std::memory_order_seq_cst) > 0 || !StuckWork()) {
        continue;
      }
      PollUntil(
          [this, &pollers] {
            return helper_stop_.load(std::memory_order_relaxed) ||
                   pollers.load(std::memory_order_relaxed) > 1 ||
                   !StuckWork();
          },
          absl::InfiniteFuture());
      continue;
    }
    FutexWait(&word, seq, tuning_.liveness_interval);
  }
}

void Core::CheckPeers(bool liveness) {
  for (Peer* p : peers_) {
    const auto state =
        static_cast<PeerState>(p->header->state.load(std::memory_order_acquire));
    if (state == PeerState::kAborted) {
      const std::string reason(
          p->header->reason,
          strnlen(p->header->reason, sizeof(p->header->reason)));
      Detected(absl::Status(static_cast<absl::StatusCode>(p->header->reason_code),
                        absl::StrCat("rank ", rank_, ": rank ", p->rank,
                                     " on this host failed: ", reason)));
      return;
    }
    const bool waiting_on_peer =
        p->send->pending() || (p->recv->pending() && !p->recv->has_data());
    if (state == PeerState::kClosed && waiting_on_peer) {
      Detected(absl::UnavailableError(absl::StrCat(
          "rank ", rank_, ": connection to rank ", p->rank,
          " (shared memory, pid ", p->header->pid,
          ") closed by peer with requests pending")));
      return;
    }
    if (liveness && state == PeerState::kRunning &&
        ProcessGone(p->header->pid)) {
      Detected(absl::UnavailableError(
          absl::StrCat("rank ", rank_, ": rank ", p->rank, " (pid ",
                       p->header->pid, " on this host) exited while ",
                       "connected through shared memory")));
      return;
    }
  }
}

void Core::Publish(PeerState state, const absl::Status& reason) {
  uint32_t expected = static_cast<uint32_t>(PeerState::kRunning);
  // Only the first change is published; reason is written before state.
  if (header_->state.load(std::memory_order_relaxed) != expected) return;
  const std::string text(reason.message());
  const size_t n = std::min(text.size(), kReasonBytes - 1);
  std::memcpy(header_->reason, text.data(), n);
  header_->reason[n] = '\0';
  header_->reason_code = static_cast<int32_t>(reason.code());
  header_->state.store(static_cast<uint32_t>(state),
                       std::memory_order_release);
  for (Peer* p : peers_) RingBell(&p->header->bell);
}

void Core::FailChannels(const absl::Status& status) {
  for (Peer* p : peers_) {
    p->send->Fail(status);
    p->recv->Fail(status);
  }
  RingBell(&header_->bell);
}

void Core::Fail(absl::Status status) {
  absl::MutexLock failing(&fail_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!status_.ok()) return;
    status_ = status;
  }
  failed_.store(true);
  Publish(PeerState::kAborted, status);
  FailChannels(status);
}

void Core::Detected(absl::Status status) {
  if (this->status().ok()) {
    HVD_LOG(WARNING) << status.message();
  }
  Fail(std::move(status));
}

absl::Status Core::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void Core::Close() {
  if (closed_.exchange(true)) return;
  if (helper_.joinable()) {
    helper_stop_.store(true, std::memory_order_release);
    header_->helper_seq.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&header_->helper_seq);
    RingBell(&header_->bell);
    helper_.join();
  }
  bool first;
  {
    absl::MutexLock lock(&mu_);
    first = status_.ok();
    if (first) {
      status_ = absl::CancelledError(absl::StrCat(
          "rank ", rank_, ": shared-memory transport context destroyed"));
    }
  }
  if (first) Publish(PeerState::kClosed, absl::OkStatus());
  for (Peer* p : peers_) {
    const absl::Status cancelled = absl::CancelledError(absl::StrCat(
        "rank ", rank_,
        ": shared-memory transport context destroyed while a request to or "
        "from rank ",
        p->rank, " was pending"));
    p->send->Fail(cancelled);
    p->recv->Fail(cancelled);
  }
  RingBell(&header_->bell);
}

}  // namespace hvd::transport::shm_internal
