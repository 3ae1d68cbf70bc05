#include "core/runtime/response_cache.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

Request Tensor(const std::string& name, int64_t n = 4) {
  Request r;
  r.set_type(ALLREDUCE);
  r.set_name(name);
  r.set_dtype(8);
  r.add_shape(n);
  return r;
}

TEST(ResponseCache, LookupMatchesOnlyEqualParameters) {
  ResponseCache cache(2);
  cache.Put(Tensor("a"));
  EXPECT_GE(cache.Lookup(Tensor("a")), 0);
  EXPECT_EQ(cache.Lookup(Tensor("a", 5)), -1);
  EXPECT_EQ(cache.Lookup(Tensor("b")), -1);
}

// Lookup compares fields one by one: every field but rank must count, and a
// field added to Request must be added there (this test fails until it is).
TEST(ResponseCache, EveryNegotiatedFieldMatters) {
  const google::protobuf::Descriptor* d = Request::descriptor();
  ASSERT_EQ(d->field_count(), 15)
      << "Request gained a field: compare it in response_cache.cc";
  const Request base = Tensor("a");
  std::vector<Request> changed(14, base);
  changed[0].set_type(ALLGATHER);
  changed[1].set_name("b");
  changed[2].set_dtype(9);
  changed[3].add_shape(2);
  changed[4].set_device(1);
  changed[5].set_op(1);
  changed[6].set_prescale(2);
  changed[7].set_postscale(0.5);
  changed[8].set_root(1);
  changed[9].set_process_set(1);
  changed[10].add_splits(1);
  changed[11].set_group("g");
  changed[12].set_group_size(2);
  changed[13].add_set_ranks(0);
  for (size_t i = 0; i < changed.size(); ++i) {
    ResponseCache cache(2);
    cache.Put(base);
    EXPECT_EQ(cache.Lookup(changed[i]), -1) << "field change " << i;
    EXPECT_GE(cache.Lookup(base), 0);
  }
}

// What an executed fused response records: each tensor's request, as Put
// of it would; an unchanged one keeps its slot, a changed one is replaced.
TEST(ResponseCache, AResponseRecordsTheRequestsItStandsFor) {
  Response fused;
  fused.set_type(ALLREDUCE);
  fused.set_dtype(8);
  for (const auto& [name, dims] :
       {std::pair<std::string, std::vector<int64_t>>{"a", {4}},
        {"b", {2, 3}}}) {
    fused.add_names(name);
    fused.add_ndims(static_cast<int32_t>(dims.size()));
    for (int64_t d : dims) fused.add_dims(d);
  }
  Request b = Tensor("b");
  b.clear_shape();
  b.add_shape(2);
  b.add_shape(3);
  ResponseCache cache(4);
  cache.PutFromResponse(fused, 0, 0);
  cache.PutFromResponse(fused, 1, 1);
  const int a_slot = cache.Lookup(Tensor("a"));
  const int b_slot = cache.Lookup(b);
  EXPECT_GE(a_slot, 0);
  EXPECT_GE(b_slot, 0);
  cache.PutFromResponse(fused, 1, 1);
  EXPECT_EQ(cache.Lookup(b), b_slot);
  fused.set_dims(1, 5);  // b is now {5, 3}
  cache.PutFromResponse(fused, 1, 1);
  EXPECT_EQ(cache.Lookup(b), -1);
  b.set_shape(0, 5);
  EXPECT_GE(cache.Lookup(b), 0);
  EXPECT_EQ(cache.Lookup(Tensor("a")), a_slot);
}

// A refreshed entry is compared with the response's tensor field by field
// (without building its request; the process set and name are its key): a
// change in any of them replaces it,
// and so does an entry Put with parameters no allreduce response has.
TEST(ResponseCache, AResponseChangingAnyFieldReplacesTheEntry) {
  Response base;
  base.set_type(ALLREDUCE);
  base.set_dtype(8);
  base.add_names("a");
  base.add_ndims(1);
  base.add_dims(4);
  std::vector<Response> changed(7, base);
  changed[0].set_dtype(9);
  changed[1].set_device(1);
  changed[2].set_op(1);
  changed[3].set_prescale(2);
  changed[4].set_postscale(0.5);
  changed[5].set_dims(0, 5);
  changed[6].set_ndims(0, 2);
  changed[6].add_dims(1);
  for (size_t i = 0; i < changed.size(); ++i) {
    ResponseCache cache(2);
    cache.PutFromResponse(base, 0, 0);
    ASSERT_GE(cache.Lookup(Tensor("a")), 0);
    cache.PutFromResponse(changed[i], 0, 0);
    EXPECT_EQ(cache.Lookup(Tensor("a")), -1) << "field change " << i;
  }
  for (int i = 0; i < 5; ++i) {
    Request odd = Tensor("a");
    if (i == 0) odd.set_root(1);
    if (i == 1) odd.add_splits(1);
    if (i == 2) odd.set_group("g");
    if (i == 3) odd.set_group_size(2);
    if (i == 4) odd.add_set_ranks(0);
    ResponseCache cache(2);
    cache.Put(odd);
    cache.PutFromResponse(base, 0, 0);
    EXPECT_EQ(cache.Lookup(odd), -1) << "parameter " << i;
    EXPECT_GE(cache.Lookup(Tensor("a")), 0) << "parameter " << i;
  }
}

// What is derived from the slots (a cached step's responses) is kept while
// the generation stays: refreshing leaves it, any change of a slot moves it.
TEST(ResponseCache, GenerationMovesWhenASlotChangesOnly) {
  ResponseCache cache(2);
  uint64_t seen = cache.generation();
  auto moved = [&]() {
    const bool changed = cache.generation() != seen;
    seen = cache.generation();
    return changed;
  };
  cache.Put(Tensor("a"));
  EXPECT_TRUE(moved()) << "insert";
  cache.Put(Tensor("a"));
  EXPECT_FALSE(moved()) << "refresh";
  Response a;
  a.set_type(ALLREDUCE);
  a.set_dtype(8);
  a.add_names("a");
  a.add_ndims(1);
  a.add_dims(4);
  cache.PutFromResponse(a, 0, 0);
  EXPECT_FALSE(moved()) << "refresh from a response";
  cache.Put(Tensor("a", 5));
  EXPECT_TRUE(moved()) << "replace";
  cache.Put(Tensor("b"));
  EXPECT_TRUE(moved()) << "insert";
  cache.Put(Tensor("c"));
  EXPECT_TRUE(moved()) << "evict";
  cache.Erase(0, "c");
  EXPECT_TRUE(moved()) << "erase";
  cache.Erase(0, "c");
  EXPECT_FALSE(moved()) << "erase of nothing";
  Request other = Tensor("x");
  other.set_process_set(3);
  cache.Put(other);
  EXPECT_TRUE(moved());
  cache.EraseProcessSet(3);
  EXPECT_TRUE(moved()) << "erase of a set";
}

TEST(ResponseCache, RankDoesNotMatter) {
  ResponseCache cache(2);
  Request r = Tensor("a");
  r.set_rank(3);
  cache.Put(r);
  EXPECT_GE(cache.Lookup(Tensor("a")), 0);
}

TEST(ResponseCache, EvictsLeastRecentlyUsedAndReusesItsSlot) {
  ResponseCache cache(2);
  cache.Put(Tensor("a"));
  cache.Put(Tensor("b"));
  const int slot_a = cache.Lookup(Tensor("a"));
  cache.Put(Tensor("b"));  // b most recent: a is the victim.
  cache.Put(Tensor("c"));
  EXPECT_EQ(cache.Lookup(Tensor("a")), -1);
  EXPECT_EQ(cache.Lookup(Tensor("c")), slot_a);
  EXPECT_EQ(cache.At(slot_a)->name(), "c");
}

TEST(ResponseCache, ErasingAProcessSetFreesItsEntriesOnly) {
  ResponseCache cache(4);
  Request in_set = Tensor("a");
  in_set.set_process_set(3);
  Request other_set = Tensor("a");
  other_set.set_process_set(4);
  cache.Put(Tensor("a"));
  cache.Put(in_set);
  cache.Put(other_set);
  const int freed = cache.Lookup(in_set);
  cache.EraseProcessSet(3);
  EXPECT_EQ(cache.Lookup(in_set), -1);
  EXPECT_EQ(cache.At(freed), nullptr);
  EXPECT_GE(cache.Lookup(Tensor("a")), 0);
  EXPECT_GE(cache.Lookup(other_set), 0);
  // The freed slot is taken again before anything is evicted.
  cache.Put(Tensor("b"));
  cache.Put(Tensor("c"));
  EXPECT_GE(cache.Lookup(Tensor("a")), 0);
  EXPECT_GE(cache.Lookup(other_set), 0);
}

TEST(ResponseCache, CapacityZeroCachesNothing) {
  ResponseCache cache(0);
  cache.Put(Tensor("a"));
  EXPECT_EQ(cache.Lookup(Tensor("a")), -1);
}

TEST(ResponseCache, TwoCachesFedTheSameSequenceAgree) {
  ResponseCache x(3), y(3);
  for (const char* name : {"a", "b", "c", "a", "d", "e", "b"}) {
    x.Put(Tensor(name));
    y.Put(Tensor(name));
  }
  for (int s = 0; s < 3; ++s) EXPECT_EQ(x.At(s)->name(), y.At(s)->name());
}

TEST(CacheBits, SetAndGet) {
  std::string bits;
  SetBit(bits, 0);
  SetBit(bits, 13);
  EXPECT_TRUE(GetBit(bits, 0));
  EXPECT_TRUE(GetBit(bits, 13));
  EXPECT_FALSE(GetBit(bits, 12));
  EXPECT_FALSE(GetBit(bits, 100));
}

}  // namespace
}  // namespace hvd::runtime
