#include "core/common/slurm_lists.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ErrorOf(absl::string_view list) {
  absl::StatusOr<std::vector<std::string>> got = ExpandSlurmHostList(list);
  EXPECT_FALSE(got.ok()) << list;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(got.status().message());
}

TEST(ExpandSlurmHostList, PlainNames) {
  EXPECT_THAT(*ExpandSlurmHostList("h1"), ElementsAre("h1"));
  EXPECT_THAT(*ExpandSlurmHostList("a,b.example.com,c-1"),
              ElementsAre("a", "b.example.com", "c-1"));
}

TEST(ExpandSlurmHostList, RangesKeepZeroPadding) {
  EXPECT_THAT(*ExpandSlurmHostList("node[01-04,07]"),
              ElementsAre("node01", "node02", "node03", "node04", "node07"));
  EXPECT_THAT(*ExpandSlurmHostList("n[8-10]"), ElementsAre("n8", "n9", "n10"));
  EXPECT_THAT(*ExpandSlurmHostList("n[098-100]"),
              ElementsAre("n098", "n099", "n100"));
  EXPECT_THAT(*ExpandSlurmHostList("n[5]"), ElementsAre("n5"));
}

TEST(ExpandSlurmHostList, SeveralNamesAndGroups) {
  EXPECT_THAT(*ExpandSlurmHostList("h[1-2],gpu[3,5],login"),
              ElementsAre("h1", "h2", "gpu3", "gpu5", "login"));
  EXPECT_THAT(
      *ExpandSlurmHostList("rack[1-2]-n[1-2].ib"),
      ElementsAre("rack1-n1.ib", "rack1-n2.ib", "rack2-n1.ib", "rack2-n2.ib"));
}

TEST(ExpandSlurmHostList, BadInput) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("an empty name"));
  EXPECT_THAT(ErrorOf("a,,b"), HasSubstr("an empty name"));
  EXPECT_THAT(ErrorOf("n[1-3"), HasSubstr("'[' without ']'"));
  EXPECT_THAT(ErrorOf("n1-3]"), HasSubstr("']' without '['"));
  EXPECT_THAT(ErrorOf("n[1-[2]]"), HasSubstr("nested '['"));
  EXPECT_THAT(ErrorOf("n[]"), HasSubstr("'' is not N or N-M"));
  EXPECT_THAT(ErrorOf("n[a-3]"), HasSubstr("'a-3' is not N or N-M"));
  EXPECT_THAT(ErrorOf("n[1-]"), HasSubstr("'1-' is not N or N-M"));
  EXPECT_THAT(ErrorOf("n[1-2-3]"), HasSubstr("'1-2-3' is not N or N-M"));
  EXPECT_THAT(ErrorOf("n[4-2]"), HasSubstr("range '4-2' ends below its start"));
  EXPECT_THAT(ErrorOf("n[1-2],n2"), HasSubstr("'n2' is listed twice"));
  EXPECT_THAT(ErrorOf("n[0-999999999]"), HasSubstr("more than 100000 names"));
  EXPECT_THAT(ErrorOf("a[0-999]b[0-999]"), HasSubstr("more than 100000 names"));
  // The message quotes the whole list.
  EXPECT_THAT(ErrorOf("ok[1-2],n[4-2]"),
              HasSubstr("bad Slurm host list 'ok[1-2],n[4-2]'"));
}

TEST(ExpandSlurmCounts, RepeatsAndSingles) {
  EXPECT_THAT(*ExpandSlurmCounts("4(x2),2", "V"), ElementsAre(4, 4, 2));
  EXPECT_THAT(*ExpandSlurmCounts("1", "V"), ElementsAre(1));
  EXPECT_THAT(*ExpandSlurmCounts("2,3(x1),16(x3)", "V"),
              ElementsAre(2, 3, 16, 16, 16));
}

TEST(ExpandSlurmCounts, BadInput) {
  for (const char* bad : {"", "0", "-1", "x", "4(x0)", "4(2)", "4(x2", "4(x)",
                          "4x2", "2,,3", "4(x2)(x2)", "4(x99999999)"}) {
    absl::StatusOr<std::vector<int>> got =
        ExpandSlurmCounts(bad, "SLURM_TASKS_PER_NODE");
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_THAT(got.status().message(),
                HasSubstr("SLURM_TASKS_PER_NODE: bad entry"))
        << bad;
  }
  EXPECT_THAT(ExpandSlurmCounts("2,4(y2)", "V").status().message(),
              HasSubstr("V: bad entry '4(y2)' in '2,4(y2)' (want N or N(xM)"));
}

}  // namespace
}  // namespace hvd
