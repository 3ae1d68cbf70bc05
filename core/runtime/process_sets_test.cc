#include "core/runtime/process_sets.h"

#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

TEST(ProcessSets, PositionInFindsARankOfAnAscendingSetAndNothingElse) {
  const std::vector<int> ranks = {1, 4, 5, 9};
  EXPECT_EQ(PositionIn(ranks, 1), 0);
  EXPECT_EQ(PositionIn(ranks, 5), 2);
  EXPECT_EQ(PositionIn(ranks, 9), 3);
  for (int absent : {0, 2, 6, 10, -1}) EXPECT_EQ(PositionIn(ranks, absent), -1);
  EXPECT_EQ(PositionIn({}, 0), -1);
}

TEST(ProcessSets, EveryRankIsInSetZeroAtItsOwnPosition) {
  ProcessSetTable sets(4096);
  for (int rank : {0, 1, 2047, 4095}) EXPECT_EQ(sets.IndexOf(0, rank), rank);
  EXPECT_EQ(sets.IndexOf(0, 4096), -1);
  EXPECT_EQ(sets.IndexOf(7, 0), -1);  // no such set
}

TEST(ProcessSets, AnAddedSetIsKeptAscendingWhateverOrderItsRanksCameIn) {
  ProcessSetTable sets(8);
  sets.Add(3, {6, 2, 4});
  EXPECT_EQ(*sets.Ranks(3), (std::vector<int>{2, 4, 6}));
  EXPECT_EQ(sets.IndexOf(3, 6), 2);
  EXPECT_EQ(sets.Find({2, 4, 6}), 3);
  sets.Remove(3);
  EXPECT_EQ(sets.Ranks(3), nullptr);
}

}  // namespace
}  // namespace hvd::runtime
