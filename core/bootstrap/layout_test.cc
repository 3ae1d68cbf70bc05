#include "core/bootstrap/layout.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/rendezvous/store.h"

namespace hvd::bootstrap {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(10);

// Runs the exchange with one thread per rank over one in-memory store; the
// ranks in `absent` take no part (their results stay UNKNOWN).
std::vector<absl::StatusOr<Layout>> Exchange(
    const std::vector<LayoutRecord>& records, Store& store,
    absl::Duration timeout = kTimeout, const std::vector<int>& absent = {}) {
  const int size = static_cast<int>(records.size());
  std::vector<absl::StatusOr<Layout>> results(size, absl::UnknownError(""));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    if (std::find(absent.begin(), absent.end(), rank) != absent.end()) continue;
    threads.emplace_back([&, rank] {
      results[rank] =
          ExchangeLayout(rank, size, records[rank], store, timeout);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(ExchangeLayoutTest, EveryRankLearnsEachRanksHostInOrderOfAppearance) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  auto results = Exchange({{"b", false}, {"a", false}, {"b", false},
                           {"c", false}, {"a", false}},
                          *store);
  for (int rank = 0; rank < 5; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].status();
    EXPECT_EQ(results[rank]->hosts, (std::vector<int>{0, 1, 0, 2, 1}));
    EXPECT_FALSE(results[rank]->all_rdma);
  }
}

TEST(ExchangeLayoutTest, AllRdmaOnlyWhenEveryRankOffersIt) {
  std::unique_ptr<Store> all = NewInMemoryStore();
  for (const auto& r : Exchange({{"a", true}, {"b", true}, {"c", true}}, *all)) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->all_rdma);
  }
  std::unique_ptr<Store> one_without = NewInMemoryStore();
  for (const auto& r :
       Exchange({{"a", true}, {"b", false}, {"c", true}}, *one_without)) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->all_rdma);
  }
}

TEST(ExchangeLayoutTest, RankZeroPublishesOneValueTheOthersRead) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  Exchange({{"a", false}, {"a", false}, {"b", false}}, *store);
  absl::StatusOr<std::string> all = store->Get("layout/all", kTimeout);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, "ok 0 0-0x2,1-1x1");
}

// A job placed host by host, the same number of ranks on each, publishes
// one group whatever its size; any other placement still comes through.
TEST(ExchangeLayoutTest, AHostByHostLayoutIsOneGroupAndAnyOtherRoundTrips) {
  std::vector<LayoutRecord> regular;
  for (int r = 0; r < 512; ++r) regular.push_back({absl::StrCat("n", r / 8)});
  std::unique_ptr<Store> store = NewInMemoryStore();
  auto results = Exchange(regular, *store);
  EXPECT_EQ(*store->Get("layout/all", kTimeout), "ok 0 0-63x8");
  for (int r : {0, 7, 8, 511}) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    ASSERT_EQ(results[r]->hosts.size(), 512u);
    EXPECT_EQ(results[r]->hosts[r], r / 8);
    EXPECT_EQ(results[r]->hosts[511], 63);
  }
  std::vector<LayoutRecord> mixed;
  std::vector<int> want;
  for (int r = 0; r < 40; ++r) {
    const int host = r < 10 ? r % 3 : r < 25 ? 3 + (r - 10) / 5 : 6;
    mixed.push_back({absl::StrCat("h", host)});
    want.push_back(host);
  }
  std::unique_ptr<Store> other = NewInMemoryStore();
  for (const auto& result : Exchange(mixed, *other)) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->hosts, want);
  }
}

TEST(ExchangeLayoutTest, AGroupThatOverrunsTheJobOrIsMalformedIsRefused) {
  for (const char* bad :
       {"ok 0 0-1x2", "ok 0 0-3x1", "ok 0 1-0x1", "ok 0 0-0x0", "ok 0 0x3",
        "ok 0 0-0x4294967297", "ok 0 0-2147483647x2147483647"}) {
    std::unique_ptr<Store> store = NewInMemoryStore();
    ASSERT_TRUE(store->Set("layout/all", bad).ok());
    // Rank 1 of 3 reads what rank 0 would publish.
    absl::StatusOr<Layout> layout =
        ExchangeLayout(1, 3, {"a", false}, *store, kTimeout);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ExchangeLayoutTest, AnUnreadableRecordFailsEveryRankNamingIt) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  // Rank 1's record is garbage (rank 1 itself takes no part).
  ASSERT_TRUE(store->Set("layout/1", "garbage").ok());
  auto results = Exchange({{"a"}, {"a"}, {"b"}}, *store, kTimeout, {1});
  for (int rank : {0, 2}) {
    ASSERT_FALSE(results[rank].ok());
    EXPECT_EQ(results[rank].status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(results[rank].status().message(),
                HasSubstr(absl::StrCat("rank ", rank, ": rank 1's layout "
                                                      "record is unreadable")));
  }
}

TEST(ExchangeLayoutTest, AMissingRankTimesOutOnEveryRankNamingTheWait) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  auto results = Exchange({{"a"}, {"a"}, {"a"}}, *store,
                          absl::Milliseconds(200), {2});
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(results[0].status().message(),
              HasSubstr("rank 0: reading every rank's host and transport"));
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(results[1].status().message(),
              HasSubstr("rank 1: reading what member 0 gathers of every "
                        "rank's host and transport"));
}

}  // namespace
}  // namespace hvd::bootstrap
