#include "host/launch_tree.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace host {
namespace {

using ::testing::ElementsAre;

std::vector<int> Indices(const std::vector<Bootstrap::Below>& hosts) {
  std::vector<int> out;
  for (const Bootstrap::Below& h : hosts) out.push_back(h.index);
  return out;
}

TEST(LaunchParents, UpToFanoutHostsAreAllStartedByHvdrun) {
  EXPECT_THAT(LaunchParents({false, false, false}, 3), ElementsAre(-1, -1, -1));
  EXPECT_THAT(LaunchParents({false, false, false}, 64),
              ElementsAre(-1, -1, -1));
}

TEST(LaunchParents, FanoutTwoIsABinaryTreeBreadthFirst) {
  EXPECT_THAT(LaunchParents(std::vector<bool>(7, false), 2),
              ElementsAre(-1, -1, 0, 0, 1, 1, 2));
}

TEST(LaunchParents, FanoutOneIsAChain) {
  EXPECT_THAT(LaunchParents(std::vector<bool>(4, false), 1),
              ElementsAre(-1, 0, 1, 2));
}

TEST(LaunchParents, ThisMachinesHostsAreHvdrunsAndOutsideTheTree) {
  // Hosts 0 and 3 are local: the tree is 1, 2, 4, 5 in that order.
  EXPECT_THAT(LaunchParents({true, false, false, true, false, false}, 1),
              ElementsAre(-1, -1, 1, -1, 2, 4));
}

TEST(LaunchParents, NoHostStartsMoreThanFanout) {
  for (int fanout : {1, 2, 3, 8}) {
    const std::vector<int> parents =
        LaunchParents(std::vector<bool>(100, false), fanout);
    std::vector<int> children(101, 0);  // [100]: hvdrun
    for (size_t h = 0; h < parents.size(); ++h) {
      EXPECT_LT(parents[h], static_cast<int>(h));
      ++children[parents[h] < 0 ? 100 : parents[h]];
    }
    for (int c : children) EXPECT_LE(c, fanout);
  }
}

TEST(Subtree, HoldsEveryDescendantAndNothingElse) {
  // hvdrun -> 0, 1; 0 -> 2, 3; 1 -> 4; 2 -> 5.
  const std::vector<Bootstrap::Below> tree = {
      {2, 0, "c"}, {3, 0, "d"}, {4, 1, "e"}, {5, 2, "f"}};
  EXPECT_THAT(Indices(Subtree(tree, 0)), ElementsAre(2, 3, 5));
  EXPECT_THAT(Indices(Subtree(tree, 1)), ElementsAre(4));
  EXPECT_THAT(Indices(Subtree(tree, 2)), ElementsAre(5));
  EXPECT_TRUE(Subtree(tree, 5).empty());
}

}  // namespace
}  // namespace host
}  // namespace hvd
