#include "core/runtime/entry.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/common/huge_pages.h"

namespace hvd::runtime {

namespace {

constexpr size_t kCacheLine = 64;
constexpr size_t kLarge = 2 * kHugePageBytes;
// Freed large buffers kept for reuse, at most this much in all.
constexpr size_t kPoolBytes = size_t{512} << 20;

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
    const size_t capacity = HugePageCapacity(bytes);
    data_ = Pool().Take(capacity);
    if (data_ == nullptr) data_ = MapHugePages(capacity);
    if (data_ == nullptr) throw std::bad_alloc();
    return;
  }
  // malloc with the alignment made by hand, not aligned_alloc: memalign
  // carves each block from a larger free chunk and hands back its edges, so
  // the block it frees is a few bytes short of the next request of the same
  // size, and a thread that allocates one size per op grows its arena by a
  // block per op (seen as resident memory climbing through a soak). A plain
  // malloc of the same size takes the freed block back.
  const size_t rounded = ((bytes + kCacheLine - 1) / kCacheLine) * kCacheLine;
  raw_ = std::malloc(rounded + kCacheLine);
  if (raw_ == nullptr) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw_);
  data_ = reinterpret_cast<void*>((start + kCacheLine - 1) & ~(kCacheLine - 1));
}

HostBuffer::~HostBuffer() {
  if (raw_ != nullptr) {
    std::free(raw_);
    return;
  }
  const size_t capacity = HugePageCapacity(size_);
  if (!Pool().Give(data_, capacity)) UnmapHugePages(data_, capacity);
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
