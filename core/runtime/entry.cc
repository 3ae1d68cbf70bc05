#include "core/runtime/entry.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <new>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hvd::runtime {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kLarge = 2 * kHugePage;
// Freed large buffers kept for reuse, at most this much in all.
constexpr size_t kPoolBytes = size_t{512} << 20;

size_t LargeCapacity(size_t bytes) {
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

// Large host buffers (outputs of allgather, alltoall, reducescatter) would
// be fresh memory on every call: the kernel must fault in and zero each
// page on first touch, which costs more than moving the data (~30 ms for
// 64 MiB with 4 KiB pages here, still ~8 ms with huge pages). Freed ones are
// kept, by size, for the next op of that size.
class LargeBufferPool {
 public:
  void* Take(size_t capacity) {
    absl::MutexLock lock(&mu_);
    auto it = free_.find(capacity);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    held_ -= capacity;
    return p;
  }
  // False when the pool is full: the caller frees `p`.
  bool Give(void* p, size_t capacity) {
    absl::MutexLock lock(&mu_);
    if (held_ + capacity > kPoolBytes) return false;
    free_.emplace(capacity, p);
    held_ += capacity;
    return true;
  }

 private:
  absl::Mutex mu_;
  std::multimap<size_t, void*> free_ ABSL_GUARDED_BY(mu_);
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;
};

LargeBufferPool& Pool() {
  static auto* pool = new LargeBufferPool;  // never destroyed: exit order
  return *pool;
}

}  // namespace

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  if (bytes >= kLarge) {
    const size_t capacity = LargeCapacity(bytes);
    data_ = Pool().Take(capacity);
    if (data_ != nullptr) return;
    data_ = std::aligned_alloc(kHugePage, capacity);
    if (data_ == nullptr) throw std::bad_alloc();
    // Transparent huge pages: 512 times fewer first-touch faults.
    madvise(data_, capacity, MADV_HUGEPAGE);  // advisory: errors are fine
    return;
  }
  const size_t rounded = ((bytes + 63) / 64) * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

HostBuffer::~HostBuffer() {
  if (size_ >= kLarge && Pool().Give(data_, LargeCapacity(size_))) return;
  std::free(data_);
}

int64_t TensorEntry::NumElements() const {
  int64_t n = 1;
  for (int64_t d : request.shape()) n *= d;
  return n;
}

size_t TensorEntry::Bytes() const {
  return static_cast<size_t>(NumElements()) * DataTypeSize(dtype());
}

std::vector<int64_t> OutputShape(const TensorEntry& entry, int64_t rows) {
  std::vector<int64_t> shape(entry.request.shape().begin(),
                             entry.request.shape().end());
  if (shape.empty()) shape.push_back(1);
  shape[0] = rows;
  return shape;
}

}  // namespace hvd::runtime
