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

// `bytes` rounded up to whole huge pages.
size_t HugePageCapacity(size_t bytes);

// `capacity` bytes (a multiple of kHugePageBytes), huge-page aligned and
// advised as huge pages, uninitialised; nullptr when the kernel has none.
void* MapHugePages(size_t capacity);

// Returns what MapHugePages(capacity) gave. Null is ignored.
void UnmapHugePages(void* data, size_t capacity);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_HUGE_PAGES_H_
