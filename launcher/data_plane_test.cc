#include "launcher/data_plane.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Results = std::vector<std::map<int, std::map<std::string, bool>>>;

TEST(SelectDataPlaneAddresses, SkipsAddressSomePeerCannotReach) {
  // Host 0 lists a dead interface first; host 1 cannot reach it.
  std::vector<std::vector<std::string>> candidates = {
      {"10.9.0.1", "10.0.0.1"}, {"10.0.0.2"}, {"10.0.0.3"}};
  Results r(3);
  r[0] = {{1, {{"10.0.0.2", true}}}, {2, {{"10.0.0.3", true}}}};
  r[1] = {{0, {{"10.9.0.1", false}, {"10.0.0.1", true}}},
          {2, {{"10.0.0.3", true}}}};
  r[2] = {{0, {{"10.9.0.1", true}, {"10.0.0.1", true}}},
          {1, {{"10.0.0.2", true}}}};
  auto chosen = SelectDataPlaneAddresses({"h0", "h1", "h2"}, candidates, r,
                                         /*final=*/false);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_TRUE(chosen->has_value());
  EXPECT_THAT(**chosen, ElementsAre("10.0.0.1", "10.0.0.2", "10.0.0.3"));
}

TEST(SelectDataPlaneAddresses, DecidesBeforeSlowProbesOfLaterCandidatesEnd) {
  // The preferred address is confirmed; the dead one's probe still runs.
  std::vector<std::vector<std::string>> candidates = {{"10.0.0.1", "10.9.0.1"},
                                                      {"10.0.0.2"}};
  Results r(2);
  r[0] = {{1, {{"10.0.0.2", true}}}};
  r[1] = {{0, {{"10.0.0.1", true}}}};
  auto chosen = SelectDataPlaneAddresses({"h0", "h1"}, candidates, r, false);
  ASSERT_TRUE(chosen.ok() && chosen->has_value());
  EXPECT_THAT(**chosen, ElementsAre("10.0.0.1", "10.0.0.2"));
}

TEST(SelectDataPlaneAddresses, WaitsWhileAPreferredResultIsMissing) {
  std::vector<std::vector<std::string>> candidates = {{"10.9.0.1", "10.0.0.1"},
                                                      {"10.0.0.2"}};
  Results r(2);
  r[0] = {{1, {{"10.0.0.2", true}}}};
  r[1] = {{0, {{"10.0.0.1", true}}}};  // 10.9.0.1 not known yet
  auto chosen = SelectDataPlaneAddresses({"h0", "h1"}, candidates, r, false);
  ASSERT_TRUE(chosen.ok());
  EXPECT_FALSE(chosen->has_value());
  // Once final, the missing result counts as a failure.
  auto final = SelectDataPlaneAddresses({"h0", "h1"}, candidates, r, true);
  ASSERT_TRUE(final.ok() && final->has_value());
  EXPECT_EQ((**final)[0], "10.0.0.1");
}

TEST(SelectDataPlaneAddresses, NoCommonAddressNamesHostAndPeers) {
  std::vector<std::vector<std::string>> candidates = {{"10.9.0.1"},
                                                      {"10.0.0.2"}};
  Results r(2);
  r[0] = {{1, {{"10.0.0.2", true}}}};
  r[1] = {{0, {{"10.9.0.1", false}}}};
  auto chosen = SelectDataPlaneAddresses({"h0", "h1"}, candidates, r, false);
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(chosen.status().message(),
              HasSubstr("host h0: no address every other host can reach; "
                        "tried 10.9.0.1 (not from h1)"));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
