#include "launcher/hosts.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;

TEST(ParseHostList, SlotsAndDefaultOfOne) {
  auto h = ParseHostList("a:4,b, c:2");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].name, "a");
  EXPECT_EQ((*h)[0].slots, 4);
  EXPECT_EQ((*h)[1].name, "b");
  EXPECT_EQ((*h)[1].slots, 1);
  EXPECT_EQ((*h)[2].name, "c");
  EXPECT_EQ((*h)[2].slots, 2);
}

TEST(ParseHostList, MalformedEntries) {
  EXPECT_THAT(ParseHostList("a:x").status().message(),
              HasSubstr("bad slot count in 'a:x'"));
  EXPECT_THAT(ParseHostList("a:0").status().message(),
              HasSubstr("bad slot count in 'a:0'"));
  EXPECT_THAT(ParseHostList("a:2,,b").status().message(),
              HasSubstr("bad host name in ''"));
  EXPECT_THAT(ParseHostList(":3").status().message(),
              HasSubstr("bad host name in ':3'"));
  EXPECT_THAT(ParseHostList("").status().message(),
              HasSubstr("empty host list"));
  EXPECT_THAT(ParseHostList("-oProxyCommand=x:1").status().message(),
              HasSubstr("bad host name"));
}

TEST(ParseHostList, DuplicateHost) {
  EXPECT_THAT(ParseHostList("a:1,b:1,a:2").status().message(),
              HasSubstr("host 'a' is listed twice"));
}

TEST(ParseHostfile, BothSyntaxesCommentsAndBlankLines) {
  auto h = ParseHostfile(
      "# cluster\n"
      "node1 slots=4\n"
      "\n"
      "node2:2   # trailing comment\n"
      "  node3\n",
      "hf");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].slots, 4);
  EXPECT_EQ((*h)[1].name, "node2");
  EXPECT_EQ((*h)[1].slots, 2);
  EXPECT_EQ((*h)[2].slots, 1);
}

TEST(ParseHostfile, MalformedLineNamesFileAndLine) {
  auto h = ParseHostfile("node1 slots=4\nnode2 cpus=4\n", "hosts.txt");
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(h.status().message(), HasSubstr("hosts.txt:2"));
  EXPECT_THAT(ParseHostfile("n slots=zero\n", "f").status().message(),
              HasSubstr("f:1: bad slot count 'zero'"));
}

TEST(ParseHostfile, EmptyFile) {
  EXPECT_THAT(ParseHostfile("# nothing\n\n", "f").status().message(),
              HasSubstr("no hosts in hostfile"));
}

TEST(ReadHostfile, Unreadable) {
  EXPECT_THAT(ReadHostfile("/nonexistent/hostfile").status().message(),
              HasSubstr("cannot read hostfile '/nonexistent/hostfile'"));
}

TEST(ReadHostfile, ReadsFile) {
  std::string path = std::string(getenv("TEST_TMPDIR")) + "/hf";
  std::ofstream(path) << "x slots=2\n";
  auto h = ReadHostfile(path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)[0].slots, 2);
}

TEST(AssignRanks, FillsHostsInOrderSlotBySlot) {
  auto a = AssignRanks({{"h1", 2}, {"h2", 2}}, 4);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 2u);
  const WorkerSlot& r3 = (*a)[1].workers[1];
  EXPECT_EQ(r3.rank, 3);
  EXPECT_EQ(r3.local_rank, 1);
  EXPECT_EQ(r3.local_size, 2);
  EXPECT_EQ(r3.cross_rank, 1);
  EXPECT_EQ(r3.cross_size, 2);
  EXPECT_EQ((*a)[0].workers[0].rank, 0);
  EXPECT_EQ((*a)[0].workers[1].rank, 1);
  EXPECT_EQ((*a)[1].workers[0].rank, 2);
}

TEST(AssignRanks, UnevenHostsCrossSizePerLocalRank) {
  auto a = AssignRanks({{"h1", 3}, {"h2", 1}, {"h3", 2}}, 5);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 3u);
  // h1: ranks 0,1,2; h2: rank 3; h3: rank 4 (one of its two slots used).
  EXPECT_EQ((*a)[2].workers.size(), 1u);
  EXPECT_EQ((*a)[2].workers[0].rank, 4);
  EXPECT_EQ((*a)[2].workers[0].cross_rank, 2);
  EXPECT_EQ((*a)[2].workers[0].cross_size, 3);  // local_rank 0 on 3 hosts
  EXPECT_EQ((*a)[0].workers[1].cross_size, 1);  // local_rank 1 only on h1
  EXPECT_EQ((*a)[0].workers[2].local_size, 3);
}

TEST(AssignRanks, UnusedHostsAreDropped) {
  auto a = AssignRanks({{"h1", 4}, {"h2", 4}}, 3);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 1u);
}

TEST(AssignRanks, TooManyProcesses) {
  EXPECT_THAT(AssignRanks({{"h1", 2}}, 3).status().message(),
              HasSubstr("-np 3 is more than the 2 slots"));
  EXPECT_THAT(AssignRanks({{"h1", 2}}, 0).status().message(),
              HasSubstr("-np must be positive"));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
