// Large buffers straight from the kernel, aligned to a transparent huge page.
//
// For the buffers hvd keeps for reuse (large outputs, collective scratch):
// glibc would serve them from its arenas once its mmap threshold has risen
// (it does so after freeing a large block, up to 32 MiB), and a 2 MiB-aligned
// block carved from an arena wastes up to 2 MiB and fragments it.
#ifndef HVD_CORE_COMMON_HUGE_PAGES_H_
#define HVD_CORE_COMMON_HUGE_PAGES_H_

#include <cstddef>

namespace hvd {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Buffers of at least this many bytes that hvd allocates per operation
// (outputs, collective scratch) are mapped here and kept for reuse rather
// than malloc'd: glibc hands freed blocks of this size back to the kernel
// (its trim) often enough that the next operation of the size pays fresh,
// zeroed pages again. Measured: a 1-4 MiB reducescatter took 0.6-2.3 ms
// that way, 0.04-0.25 ms with malloc told to keep its memory.
inline constexpr size_t kReusedBufferMinBytes = size_t{256} << 10;

// `bytes` rounded up to whole huge pages.
size_t HugePageCapacity(size_t bytes);

// `capacity` bytes (a multiple of kHugePageBytes), huge-page aligned and
// advised as huge pages, uninitialised; nullptr when the kernel has none.
void* MapHugePages(size_t capacity);

// Returns what MapHugePages(capacity) gave. Null is ignored.
void UnmapHugePages(void* data, size_t capacity);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_HUGE_PAGES_H_
