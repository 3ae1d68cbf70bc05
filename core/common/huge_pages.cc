#include "core/common/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace hvd {

size_t HugePageCapacity(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

void* MapHugePages(size_t capacity) {
  // Map a huge page more than asked, then give back the edges around the
  // aligned part.
  const size_t span = capacity + kHugePageBytes;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned =
      (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  if (aligned > start) munmap(p, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + capacity) {
    munmap(reinterpret_cast<void*>(aligned + capacity),
           end - (aligned + capacity));
  }
  void* data = reinterpret_cast<void*>(aligned);
  // Transparent huge pages: 512 times fewer first-touch faults.
  madvise(data, capacity, MADV_HUGEPAGE);  // advisory: errors are fine
  return data;
}

void UnmapHugePages(void* data, size_t capacity) {
  if (data != nullptr) munmap(data, capacity);
}

}  // namespace hvd
