// Futex waits and wakes on a 32-bit word that may live in shared memory
// (process-shared: no FUTEX_PRIVATE_FLAG).
#ifndef HVD_CORE_TRANSPORT_SHM_FUTEX_H_
#define HVD_CORE_TRANSPORT_SHM_FUTEX_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace hvd::transport::shm_internal {

// Sleeps while *word == expected, at most `timeout` (spurious wakeups are
// possible: callers re-check their condition).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout);
// Wakes every thread sleeping on `word`, in any process.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_FUTEX_H_
