#include "core/common/streaming_copy.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace hvd {
namespace {

// Copies `n` bytes between offsets `dst_at` and `src_at` of two buffers and
// checks the copy and that nothing around it was touched.
void CheckCopy(size_t n, size_t dst_at, size_t src_at) {
  const size_t guard = 80;
  std::vector<uint8_t> src(src_at + n + guard);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> dst(dst_at + n + guard, 0xEE);
  StreamingCopy(dst.data() + dst_at, src.data() + src_at, n);
  for (size_t i = 0; i < dst_at; ++i) {
    ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " before the copy";
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(dst[dst_at + i], src[src_at + i])
        << "byte " << i << " of " << n << " (dst at " << dst_at << ", src at "
        << src_at << ")";
  }
  for (size_t i = dst_at + n; i < dst.size(); ++i) {
    ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " after the copy";
  }
}

TEST(StreamingCopyTest, CopiesEveryLengthAndAlignmentExactly) {
  for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 79, 80, 127, 128, 129, 1000,
                   4096, 65536 + 13}) {
    for (size_t dst_at : {0, 1, 8, 15, 16, 33}) {
      for (size_t src_at : {0, 3, 16}) {
        CheckCopy(n, dst_at, src_at);
      }
    }
  }
}

TEST(StreamingCopyTest, CopiesALargeBufferWhole) {
  CheckCopy(size_t{8} << 20, 0, 0);
  CheckCopy((size_t{8} << 20) + 5, 7, 1);
}

}  // namespace
}  // namespace hvd
