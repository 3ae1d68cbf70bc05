// What a shared-memory context is built with. Plain data: the core's
// configuration fills it once at init (HVD_SHM_* variables); the transport
// reads no environment.
#ifndef HVD_CORE_TRANSPORT_SHM_SHM_OPTIONS_H_
#define HVD_CORE_TRANSPORT_SHM_SHM_OPTIONS_H_

#include <cstddef>

#include "absl/time/time.h"

namespace hvd::transport {

// The data path's knobs; the defaults are the measured best on the
// development machines (docs/performance.md).
struct ShmTuning {
  // How long a waiter polls without progress before it sleeps
  // (HVD_SHM_SPIN_US).
  absl::Duration spin = absl::Microseconds(50);
  // Largest copy between publications of a ring cursor (HVD_SHM_PIECE_BYTES,
  // rounded up to the ring's slot size).
  size_t piece_bytes = size_t{64} << 10;
  // Data capacity of each ring (HVD_SHM_RING_BYTES, rounded up to the slot
  // size; at least two slots). A segment holds one ring per local peer; each
  // takes memory in /dev/shm as its writer's sends first reach its pages.
  size_t ring_bytes = size_t{1} << 20;
  // Whether a polling waiter yields the CPU between polls (HVD_SHM_YIELD).
  bool yield = true;
  // A sender whose plain copies of large pieces into a ring run below this
  // rate, in MB/s, writes them with streaming stores instead, trying a
  // plain copy again now and then (HVD_SHM_SLOW_COPY_MBPS; 0: never).
  size_t slow_copy_mbps = 8000;
};

struct ShmOptions {
  absl::Duration connect_timeout = absl::Seconds(30);
  ShmTuning tuning;
};

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_SHM_SHM_OPTIONS_H_
