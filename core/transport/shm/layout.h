// The bytes of a shared-memory segment, as every process of a host sees
// them. One segment per rank: a header (identity, doorbell, failure state)
// and one inbound ring per local peer. Only plain data and lock-free atomics
// live here, at fixed offsets, so processes built from the same source agree
// on the layout; kMagic carries a layout version.
#ifndef HVD_CORE_TRANSPORT_SHM_LAYOUT_H_
#define HVD_CORE_TRANSPORT_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hvd::transport::shm_internal {

inline constexpr uint64_t kMagic = 0x32766d68732d6468;  // "hd-shmv2"
inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kPage = 4096;
// Every message starts with a slot of this many bytes (its length in the
// first 8) and is padded to a multiple of it, so a header never wraps.
inline constexpr size_t kSlot = 64;
inline constexpr size_t kReasonBytes = 1024;

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// Futex word of one process: every thread of the owner that blocks sleeps on
// `seq`; whoever changes state the owner may be waiting for (data in one of
// its rings, space freed in a ring it writes, a local op completed, an
// abort) bumps `seq` and wakes it, but only when `sleepers` says somebody
// sleeps.
struct alignas(kCacheLine) Doorbell {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleepers;
};

enum class PeerState : uint32_t {
  kRunning = 0,
  kAborted = 1,  // reason_code / reason hold why
  kClosed = 2,   // the context was destroyed normally
};

struct SegmentHeader {
  uint64_t magic;
  uint64_t cookie;  // random; published with the name, checked by attachers
  int32_t pid;
  int32_t rank;
  uint32_t num_rings;
  uint32_t reserved;
  uint64_t ring_bytes;  // data capacity of each ring, a multiple of kSlot
  alignas(kCacheLine) Doorbell bell;
  // Threads of the owner inside a wait loop (they progress every channel,
  // and the bell reaches the sleeping ones), the helper thread included
  // while it is active.
  alignas(kCacheLine) std::atomic<uint32_t> pollers;
  // The owner's helper thread sleeps on this while idle; a peer bumps it
  // and wakes it when the owner must move bytes (a writer blocked on a full
  // ring, or room freed for the owner's blocked writer) and no thread of
  // the owner polls.
  alignas(kCacheLine) std::atomic<uint32_t> helper_seq;
  alignas(kCacheLine) std::atomic<uint32_t> state;  // PeerState
  int32_t reason_code;  // absl::StatusCode, written before state
  char reason[kReasonBytes];
};

// Single producer (the peer the ring is from), single consumer (the owner).
// `head` and `tail` count bytes ever written and consumed; the data offset
// of a count is count % ring_bytes.
struct RingHeader {
  alignas(kCacheLine) std::atomic<uint64_t> head;
  alignas(kCacheLine) std::atomic<uint64_t> tail;
  // Set by the producer while an op of its waits for room; the consumer
  // then tells it when it frees some.
  alignas(kCacheLine) std::atomic<uint32_t> writer_waiting;
};

constexpr size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Offsets: header, then the ring headers, then each ring's data, each part
// on its own pages. The owner reserves the headers (HeadersBytes) when it
// creates the segment; a ring's data is reserved by the peer that writes
// it, as its writes first reach each part (a rank sends bulk data to few
// of its local peers).
inline constexpr size_t kRingHeadersOffset =
    RoundUp(sizeof(SegmentHeader), kPage);

inline size_t HeadersBytes(uint32_t num_rings) {
  return kRingHeadersOffset + RoundUp(num_rings * sizeof(RingHeader), kPage);
}

inline size_t RingDataOffset(uint32_t num_rings, size_t ring_bytes,
                             uint32_t index) {
  return HeadersBytes(num_rings) + index * RoundUp(ring_bytes, kPage);
}

inline size_t SegmentBytes(uint32_t num_rings, size_t ring_bytes) {
  return RingDataOffset(num_rings, ring_bytes, num_rings);
}

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_LAYOUT_H_
