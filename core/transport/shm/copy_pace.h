// How a sender copies its pieces into a shared-memory ring: plainly, unless
// plain copies are measured slow, then with streaming stores.
//
// On some machines (an AMD EPYC VM, in some placements of its two vCPUs
// that come and go every few seconds) plain stores into ring lines last
// held by the peer's CPU, memcpy's `rep movsb` or vector stores, run at 2-4
// GB/s instead of 30 and more, and allreduces of 16 KiB-4 MiB take 4-9
// times as long. Streaming stores, which do not take a line over before
// writing it, are not slowed there; but where plain copies are fast they
// cost 1.3-1.7x, as the reader then finds the bytes in memory rather than
// in a shared cache. So the sender times its plain copies of large pieces,
// streams while they are slow, and tries a plain one again every
// kProbeEvery pieces.
#ifndef HVD_CORE_TRANSPORT_SHM_COPY_PACE_H_
#define HVD_CORE_TRANSPORT_SHM_COPY_PACE_H_

#include <cstddef>
#include <cstdint>

namespace hvd::transport::shm_internal {

class CopyPace {
 public:
  enum class Way {
    kPlain,       // memcpy, untimed
    kTimedPlain,  // memcpy, then Timed() with how long it took
    kStreamed,    // StreamingCopy
  };
  // Pieces smaller than this are copied plainly and untimed: a streamed
  // small message reaches its reader later, and a clock read would be a
  // large share of its copy.
  static constexpr size_t kTimedBytes = size_t{16} << 10;
  // Plain copies measured slow this many times in a row switch to
  // streaming (one slow copy may be a preemption or a page's first touch).
  static constexpr int kSlowToStream = 2;
  // While streaming, every this many-th large piece is a timed plain copy.
  static constexpr int kProbeEvery = 32;

  // `slow_mbps`: plain copies below this rate (MB/s) are slow; 0: never
  // stream.
  explicit CopyPace(size_t slow_mbps) : slow_mbps_(slow_mbps) {}

  // How to copy the next piece of `bytes`.
  Way Next(size_t bytes);
  // After a kTimedPlain copy of `bytes` that took `nanos`.
  void Timed(size_t bytes, int64_t nanos);
  bool streaming() const { return streaming_; }

 private:
  const size_t slow_mbps_;
  bool streaming_ = false;
  int slow_in_a_row_ = 0;
  int until_probe_ = 0;  // streamed pieces left before the next probe
};

// Copies `n` bytes from `src` into a ring at `dst` the way `pace` says, and
// tells it how long a timed copy took.
void PacedCopy(CopyPace& pace, char* dst, const char* src, size_t n);

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_COPY_PACE_H_
