#include "core/runtime/entry.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace hvd::runtime {

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  // Large buffers (outputs of allgather, alltoall, reducescatter; the
  // fusion buffer) are fresh memory on every call: with 4 KiB pages their
  // first touch costs a page fault per page (~30 ms for 64 MiB here), more
  // than moving the data. Transparent huge pages cut that 512-fold.
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes >= 2 * kHuge) {
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    data_ = std::aligned_alloc(kHuge, rounded);
    if (data_ == nullptr) throw std::bad_alloc();
    madvise(data_, rounded, MADV_HUGEPAGE);  // advisory: errors are fine
    return;
  }
  const size_t rounded = ((bytes + 63) / 64) * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

HostBuffer::~HostBuffer() { std::free(data_); }

int64_t TensorEntry::NumElements() const {
  int64_t n = 1;
  for (int64_t d : request.shape()) n *= d;
  return n;
}

size_t TensorEntry::Bytes() const {
  return static_cast<size_t>(NumElements()) * DataTypeSize(dtype());
}

}  // namespace hvd::runtime
