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
  EXPECT_EQ(*all, "ok 0 0,0,1");
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
