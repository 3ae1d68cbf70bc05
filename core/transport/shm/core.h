// The state a ShmContext shares with its Requests: this rank's segment, the
// mapped segments of its local peers, the channels, the first failure, and
// the wait loop. Requests hold it by shared_ptr, so waiting on a request
// after its context is destroyed is safe (the request has then failed with
// Cancelled).
#ifndef HVD_CORE_TRANSPORT_SHM_CORE_H_
#define HVD_CORE_TRANSPORT_SHM_CORE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/transport/shm/channel.h"
#include "core/transport/shm/layout.h"
#include "core/transport/shm/segment.h"
#include "core/transport/shm/shm_options.h"

namespace hvd::transport::shm_internal {

// The knobs of one context: ShmTuning, rounded, and fixed internals.
struct Tuning {
  absl::Duration spin;   // ShmTuning::spin
  size_t piece_bytes;    // ShmTuning::piece_bytes, rounded up to kSlot
  size_t ring_bytes;     // ShmTuning::ring_bytes, rounded up to kSlot
  bool yield;            // ShmTuning::yield
  size_t slow_copy_mbps;  // ShmTuning::slow_copy_mbps
  // A sleeping waiter wakes this often to check that its peers still live.
  absl::Duration liveness_interval;
  // How long the helper thread leaves stuck work to the owner's threads
  // before it moves the bytes itself.
  absl::Duration helper_delay;
};
Tuning TuningFrom(const ShmTuning& options);

// Thread-safe once every peer is added.
class Core {
 public:
  Core(int rank, int size, Tuning tuning, std::unique_ptr<Segment> own);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // Before Start(): `segment` is `peer`'s (checked by the caller), with
  // `num_rings` rings of `ring_bytes` each as the caller read them there
  // (the peer's header is not read again); our ring in it is number
  // `index_there`, its ring in ours number `index_here`.
  void AddPeer(int peer, std::unique_ptr<Segment> segment, uint32_t num_rings,
               size_t ring_bytes, uint32_t index_there, uint32_t index_here);
  // Starts the helper thread (when there are peers).
  void Start();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool connected(int peer) const;
  int peer_pid(int peer) const;

  // Posts `op` on its peer's channel (moving what it can at once), or fails
  // it when the peer is not connected. Sends reserve this rank's ring in the
  // peer's segment as they first reach its pages: when /dev/shm refuses
  // (ResourceExhausted when it is full), the send and the context fail.
  void Post(const std::shared_ptr<Op>& op);
  // Blocks until `op` completes or `deadline` passes (false then).
  bool Wait(const Op& op, absl::Time deadline);
  // One non-blocking round of progress; whether `op` is done after it.
  bool Poll(const Op& op);

  // Records the first failure, fails every pending and future op, publishes
  // it in our segment so local peers fail too, and wakes everybody. Returns
  // once the ops are failed, also to a caller that came second: after Abort
  // the caller may free what its requests pointed at.
  void Fail(absl::Status status);
  absl::Status status() const;
  // The context is going away: pending ops fail with Cancelled and peers see
  // this rank as closed. Idempotent.
  void Close();

 private:
  struct Peer {
    int rank = -1;
    std::unique_ptr<Segment> segment;
    SegmentHeader* header = nullptr;
    std::unique_ptr<SendChannel> send;
    std::unique_ptr<RecvChannel> recv;
  };

  // What reserves parts of the `bytes`-byte ring at `offset` of `segment`,
  // this rank's ring in `peer`'s segment: its error names both ranks and
  // /dev/shm and says what to do.
  SendChannel::Reserve RingReservation(const Segment* segment, size_t offset,
                                       size_t bytes, int peer) const;
  // Moves bytes on every channel with pending ops; Progressed flags.
  int ProgressAll();
  // Whether some op could move bytes that a peer waits for, or that wait
  // for room a peer made: what a thread leaving a wait must not abandon.
  bool StuckWork() const;
  // Polls and sleeps like a waiter until `done()` or `deadline`; counts
  // itself in the segment's pollers meanwhile.
  template <typename Done>
  void PollUntil(const Done& done, absl::Time deadline);
  // The helper thread: idle on helper_seq; woken by a peer (or a leaving
  // waiter) when bytes must move and no thread of ours polls, it polls
  // until nothing is stuck. Needed because a thread may wait on another
  // transport (a composite context) while a peer waits on us.
  void HelperLoop();
  // Fails the context if a peer aborted, closed while ops with it wait on
  // it, or (with `liveness`) its process is gone.
  void CheckPeers(bool liveness);
  // Fail() for a failure found here (not an Abort): logged once.
  void Detected(absl::Status status);
  void Publish(PeerState state, const absl::Status& reason);
  void FailChannels(const absl::Status& status);

  const int rank_;
  const int size_;
  const Tuning tuning_;
  const std::unique_ptr<Segment> own_;
  SegmentHeader* const header_;  // in own_
  std::vector<std::unique_ptr<Peer>> by_rank_;  // null: not connected
  std::vector<Peer*> peers_;                    // the connected ones
  std::atomic<bool> failed_{false};
  std::atomic<bool> closed_{false};
  std::atomic<bool> helper_stop_{false};
  std::thread helper_;

  // Held through Fail, channels included (never while a channel's lock is
  // held): a second caller returns only once the ops are failed.
  absl::Mutex fail_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_CORE_H_
