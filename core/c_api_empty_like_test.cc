// hvd_empty_like: a caller-owned host tensor with the input's shape and
// DLPack dtype; large ones are recycled through hvd's buffer pool, so a
// freed output's memory comes back for the next one of that size.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/c_api.h"
#include "gtest/gtest.h"

namespace {

DLTensor Like(int64_t* shape, int ndim, DLDataType dtype) {
  DLTensor t{};
  static char byte;
  t.data = &byte;
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

TEST(EmptyLikeTest, ShapeAndDtypeOfTheInputCompactOnTheHost) {
  int64_t shape[] = {3, 5};
  DLTensor like = Like(shape, 2, {kDLInt, 16, 1});
  DLManagedTensor* out = hvd_empty_like(&like);
  ASSERT_NE(out, nullptr) << hvd_last_error();
  const DLTensor& t = out->dl_tensor;
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape[0], 3);
  EXPECT_EQ(t.shape[1], 5);
  EXPECT_EQ(t.dtype.code, kDLInt);
  EXPECT_EQ(t.dtype.bits, 16);
  EXPECT_EQ(t.strides, nullptr);
  EXPECT_EQ(t.byte_offset, 0u);
  ASSERT_NE(t.data, nullptr);
  std::memset(t.data, 1, 30);  // writable, all 15 int16
  out->deleter(out);
}

TEST(EmptyLikeTest, ScalarAndEmpty) {
  DLTensor scalar = Like(nullptr, 0, {kDLFloat, 64, 1});
  DLManagedTensor* out = hvd_empty_like(&scalar);
  ASSERT_NE(out, nullptr) << hvd_last_error();
  EXPECT_EQ(out->dl_tensor.ndim, 0);
  out->deleter(out);
  int64_t zero[] = {0, 4};
  DLTensor empty = Like(zero, 2, {kDLFloat, 32, 1});
  out = hvd_empty_like(&empty);
  ASSERT_NE(out, nullptr) << hvd_last_error();
  EXPECT_EQ(out->dl_tensor.shape[0], 0);
  out->deleter(out);
}

TEST(EmptyLikeTest, LargeBuffersComeBackFromThePool) {
  int64_t shape[] = {16 << 20};  // 64 MiB of float32
  DLTensor like = Like(shape, 1, {kDLFloat, 32, 1});
  DLManagedTensor* first = hvd_empty_like(&like);
  ASSERT_NE(first, nullptr) << hvd_last_error();
  void* data = first->dl_tensor.data;
  first->deleter(first);
  DLManagedTensor* second = hvd_empty_like(&like);
  ASSERT_NE(second, nullptr) << hvd_last_error();
  EXPECT_EQ(second->dl_tensor.data, data);
  second->deleter(second);
}

TEST(EmptyLikeTest, RefusesWhatIsNotADenseHostTensor) {
  EXPECT_EQ(hvd_empty_like(nullptr), nullptr);
  EXPECT_NE(std::string(hvd_last_error()), "");
  int64_t shape[] = {4};
  DLTensor gpu = Like(shape, 1, {kDLFloat, 32, 1});
  gpu.device = {kDLCUDA, 0};
  EXPECT_EQ(hvd_empty_like(&gpu), nullptr);
  EXPECT_NE(std::string(hvd_last_error()).find("GPU"), std::string::npos)
      << hvd_last_error();
  int64_t strided_shape[] = {2, 2};
  int64_t strides[] = {1, 2};
  DLTensor strided = Like(strided_shape, 2, {kDLFloat, 32, 1});
  strided.strides = strides;
  EXPECT_EQ(hvd_empty_like(&strided), nullptr);
}

}  // namespace
