#include "core/runtime/entry.h"

#include <cstdlib>
#include <new>

namespace hvd::runtime {

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
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
