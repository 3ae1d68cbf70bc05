// OutputShape: the shape of an hvd-allocated output (allgather, alltoall,
// reducescatter), shared by the CPU executor and the GPU backend; and
// HostBuffer, the memory of such an output on the host.
#include "core/runtime/entry.h"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/common/sanitizers.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

TensorEntry EntryOfShape(const std::vector<int64_t>& shape) {
  TensorEntry entry;
  for (int64_t d : shape) entry.request.add_shape(d);
  return entry;
}

TEST(OutputShape, ReplacesTheFirstDimensionOnly) {
  EXPECT_EQ(OutputShape(EntryOfShape({4, 3, 2}), 7),
            (std::vector<int64_t>{7, 3, 2}));
}

TEST(OutputShape, ZeroRowsKeepTheOtherDimensions) {
  EXPECT_EQ(OutputShape(EntryOfShape({4, 5}), 0),
            (std::vector<int64_t>{0, 5}));
}

TEST(OutputShape, ScalarInputBecomesOneDimension) {
  EXPECT_EQ(OutputShape(EntryOfShape({}), 3), (std::vector<int64_t>{3}));
}

TEST(HostBuffer, IsAlignedToACacheLineOrAHugePage) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{512} << 10,
                       size_t{8} << 20}) {
    HostBuffer buffer(bytes);
    const auto address = reinterpret_cast<uintptr_t>(buffer.data());
    EXPECT_EQ(address % (bytes >= (size_t{4} << 20) ? (2 << 20) : 64), 0u)
        << bytes << " bytes";
    std::memset(buffer.data(), 1, bytes);  // all of it is ours (ASan checks)
    EXPECT_EQ(buffer.size(), bytes);
  }
}

// The executor's thread allocates one output size op after op, with small
// allocations of its own made in between. Each freed output must be taken
// back by the next, not left as a hole the next cannot use: the heap stays
// within a few outputs, not one output more per op.
TEST(HostBuffer, OneSizeAllocatedOpAfterOpReusesItsMemory) {
  if (kSanitizedBuild) {
    GTEST_SKIP() << "the sanitizer's allocator stands in for glibc's arenas";
  }
  // glibc raises its mmap threshold this far by itself in a long job (after
  // freeing a mapped block); set here so that outputs come from the heap.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  constexpr size_t kOutput = size_t{512} << 10;
  constexpr int kOps = 1000;
  size_t heap_after_warmup = 0, heap_at_end = 0;
  std::vector<void*> kept;
  std::thread executor([&] {
    for (int op = 0; op < kOps; ++op) {
      auto output = std::make_unique<HostBuffer>(kOutput);
      static_cast<char*>(output->data())[0] = 1;
      kept.push_back(std::malloc(96));
      output.reset();
      if (op == 10) heap_after_warmup = mallinfo2().arena;
    }
    heap_at_end = mallinfo2().arena;
  });
  executor.join();
  for (void* p : kept) std::free(p);
  EXPECT_LT(heap_at_end - heap_after_warmup, 8 * kOutput)
      << "the heap grew by " << (heap_at_end - heap_after_warmup) / kOutput
      << " outputs' worth over " << kOps << " ops";
}

}  // namespace
}  // namespace hvd::runtime
