#include "core/runtime/negotiation_tree.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NegotiationTreeTest, UpToFanoutPlusOneRanksAreFlat) {
  EXPECT_EQ(NegotiationChildren(0, 65, 64).size(), 64u);
  for (int r = 1; r < 65; ++r) {
    EXPECT_EQ(NegotiationParent(r, 64), 0);
    EXPECT_TRUE(NegotiationChildren(r, 65, 64).empty());
  }
}

TEST(NegotiationTreeTest, EveryRankHasOneParentThatListsIt) {
  for (int fanout : {1, 2, 3, 64}) {
    for (int size : {1, 2, 7, 66, 300}) {
      std::vector<int> seen(size, 0);
      for (int r = 0; r < size; ++r) {
        for (int child : NegotiationChildren(r, size, fanout)) {
          EXPECT_EQ(NegotiationParent(child, fanout), r);
          ++seen[child];
        }
      }
      EXPECT_EQ(seen[0], 0);
      for (int r = 1; r < size; ++r) EXPECT_EQ(seen[r], 1) << "rank " << r;
    }
  }
}

TEST(NegotiationTreeTest, ALargeJobIsAFanoutAryTree) {
  EXPECT_THAT(NegotiationChildren(0, 7, 2), ElementsAre(1, 2));
  EXPECT_THAT(NegotiationChildren(1, 7, 2), ElementsAre(3, 4));
  EXPECT_THAT(NegotiationChildren(2, 7, 2), ElementsAre(5, 6));
  EXPECT_EQ(NegotiationParent(6, 2), 2);
  // 4,096 ranks, fanout 64: rank 0 has 64 children, depth 2.
  EXPECT_EQ(NegotiationChildren(0, 4096, 64).size(), 64u);
  EXPECT_EQ(NegotiationParent(NegotiationParent(4095, 64), 64), 0);
}

TEST(NegotiationTreeTest, ABundleOfNestedBundlesSplitsIntoEveryList) {
  std::string child, bundle;
  AppendToBundle(3, "three", &child);
  AppendToBundle(4, "", &child);
  AppendToBundle(1, "one", &bundle);
  bundle += child;
  std::vector<std::string> lists(5);
  std::vector<bool> filled(5, false);
  ASSERT_TRUE(SplitBundle(bundle, 1, &lists, &filled).ok());
  EXPECT_THAT(lists, ElementsAre("", "one", "", "three", ""));
  EXPECT_THAT(filled, ElementsAre(false, true, false, true, true));
}

TEST(NegotiationTreeTest, AMalformedBundleNamesTheChildItCameFrom) {
  std::vector<std::string> lists(3);
  std::vector<bool> filled(3, false);
  std::string cut;
  AppendToBundle(1, "hello", &cut);
  cut.pop_back();
  absl::Status s = SplitBundle(cut, 1, &lists, &filled);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("malformed negotiation message from rank 1: a frame "
                        "is cut short"));
  std::string outside;
  AppendToBundle(7, "x", &outside);
  s = SplitBundle(outside, 2, &lists, &filled);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("from rank 2: it names rank 7 of a job of 3"));
  std::string twice;
  AppendToBundle(2, "a", &twice);
  AppendToBundle(2, "b", &twice);
  s = SplitBundle(twice, 2, &lists, &filled);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 2's list came twice"));
}

}  // namespace
}  // namespace hvd::runtime
