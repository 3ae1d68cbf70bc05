// OutputShape: the shape of an hvd-allocated output (allgather, alltoall,
// reducescatter), shared by the CPU executor and the GPU backend.
#include "core/runtime/entry.h"

#include <vector>

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

}  // namespace
}  // namespace hvd::runtime
