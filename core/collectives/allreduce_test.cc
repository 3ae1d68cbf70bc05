// Allreduce over the real TCP transport, one thread per rank: every dtype and
// op against an exact reference, for world sizes 1-8, empty, single, odd and
// larger-than-fusion-threshold buffers, with every algorithm.
#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/collectives/collectives.h"
#include "core/collectives/reduce.h"
#include "core/collectives/test_mesh.h"
#include "core/collectives/test_values.h"
#include "core/common/sanitizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::collectives {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// 270001 float32 elements are just over 1 MiB (the smallest dtype moves
// 264 KiB); a 16 KiB chunk splits every ring segment into several chunks.
// A sanitized build keeps that shape at an eighth of the size.
constexpr size_t kScale = kSanitizedBuild ? 8 : 1;
constexpr size_t kLargeCount = 270001 / kScale;
constexpr size_t kLargeChunkBytes = (size_t{16} << 10) / kScale;

using AllreduceCase =
    std::tuple<int, size_t, AllreduceAlgorithm, MeshTransport>;

std::string CaseName(const ::testing::TestParamInfo<AllreduceCase>& info) {
  const auto [world, count, algorithm, transport] = info.param;
  return absl::StrCat("World", world, "Count", count, AlgorithmName(algorithm),
                      MeshTransportName(transport));
}

struct Job {
  DataType dtype;
  ReduceOp op;
  std::vector<char> want;
};

// Named fields rather than a structured binding: lambdas capture `count`,
// which clang 14 does not allow for a binding.
class AllreduceTest : public ::testing::TestWithParam<AllreduceCase> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  size_t count() const { return std::get<1>(GetParam()); }
  AllreduceAlgorithm algorithm() const { return std::get<2>(GetParam()); }
  MeshTransport transport() const { return std::get<3>(GetParam()); }

  // The parameters' algorithm over `mesh`, in chunks that make even the
  // small counts span several.
  CollectiveOptions Options(const TestMesh& mesh) const {
    CollectiveOptions options;
    options.algorithm = algorithm();
    options.hosts = mesh.hosts();
    options.chunk_bytes = count() >= kLargeCount ? kLargeChunkBytes : 200;
    // Several segments wherever the ring runs over more than a few chunks.
    options.ring_segment_bytes = 5 * options.chunk_bytes;
    // The large counts out of place receive their last step streamed, as
    // the largest do by default.
    options.streaming_store_bytes = count() >= kLargeCount ? 1 : 0;
    options.timeout = absl::Seconds(30);
    return options;
  }

  std::vector<int> AllRanks() const {
    std::vector<int> ranks(world());
    for (int r = 0; r < world(); ++r) ranks[r] = r;
    return ranks;
  }

  // Sets a postscale of 0.5 in `options` and returns what a float32 Sum of
  // every rank's MakeInput then gives: the pieces tests' expectation.
  std::vector<char> HalvedSum(CollectiveOptions& options) const {
    options.postscale = 0.5;
    std::vector<char> want =
        Expected(DataType::kFloat32, ReduceOp::kSum, AllRanks(), count());
    Scale(want.data(), count(), DataType::kFloat32, options.postscale);
    return want;
  }

  // Runs `reduce` on every rank of the parameters' mesh with Options() and
  // a postscale of 0.5, given the rank's float32 Sum input; it returns the
  // collective's status, puts the result (count() elements) in `got` and
  // what else it found wrong in `bad`. Expects every rank OK, every result
  // the halved sum and nothing else wrong.
  using Reduction = std::function<absl::Status(
      transport::Context& context, const CollectiveOptions& options,
      const std::vector<char>& input, std::vector<char>* got,
      std::string* bad)>;
  void ExpectHalvedSumOnEveryRank(const Reduction& reduce) const {
    TestMesh* mesh = TestMesh::Shared(world(), transport());
    ASSERT_NE(mesh, nullptr);
    CollectiveOptions options = Options(*mesh);
    const std::vector<char> want = HalvedSum(options);
    const DataType dtype = DataType::kFloat32;
    std::vector<std::string> bad(world());
    auto statuses = mesh->RunAll([&](int rank, transport::Context& context) {
      const std::vector<char> input =
          MakeInput(dtype, ReduceOp::kSum, rank, count());
      std::vector<char> got;
      std::string other;
      absl::Status status = reduce(context, options, input, &got, &other);
      bad[rank] = Mismatch(absl::StrCat("rank ", rank), dtype, got.data(),
                           want.data(), count());
      if (bad[rank].empty() && !other.empty()) {
        bad[rank] = absl::StrCat("rank ", rank, ": ", other);
      }
      return status;
    });
    EXPECT_EQ(FailedRanks(AllRanks(), statuses), "");
    for (const std::string& m : bad) EXPECT_EQ(m, "");
  }
};

TEST_P(AllreduceTest, EveryDtypeAndOpMatchesExactReference) {
  const int world = this->world();
  const size_t count = this->count();
  TestMesh* mesh = TestMesh::Shared(world, transport());
  ASSERT_NE(mesh, nullptr);
  CollectiveOptions options = Options(*mesh);

  const std::vector<int> all_ranks = AllRanks();
  std::vector<Job> jobs;
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllOps) {
      jobs.push_back({dtype, op, Expected(dtype, op, all_ranks, count)});
    }
  }
  std::vector<std::vector<std::string>> mismatches(world);
  auto statuses = mesh->RunAll([&](int rank, transport::Context& context) {
    const Group group = Group::All(context);
    for (const Job& job : jobs) {
      std::vector<char> data = MakeInput(job.dtype, job.op, rank, count);
      absl::Status status = Allreduce(context, group, data.data(), count,
                                      job.dtype, job.op, options);
      const std::string what =
          absl::StrCat("rank ", rank, " ", ReduceOpName(job.op));
      if (!status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat(what, " ", DataTypeName(job.dtype),
                                         ": ", status.message()));
      }
      std::string bad =
          Mismatch(what, job.dtype, data.data(), job.want.data(), count);
      if (!bad.empty()) mismatches[rank].push_back(bad);
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(FailedRanks(all_ranks, statuses), "");
  for (const auto& rank_mismatches : mismatches) {
    for (const std::string& m : rank_mismatches) ADD_FAILURE() << m;
  }
}

// Both ways an Average is done: a division by the world size, and a factor
// (a scaled Average, or Horovod's 1/N).
TEST_P(AllreduceTest, PostscaleIsAppliedOnceToEveryElement) {
  const int world = this->world();
  const size_t count = this->count();
  TestMesh* mesh = TestMesh::Shared(world, transport());
  ASSERT_NE(mesh, nullptr);
  const std::vector<int> all_ranks = AllRanks();
  for (auto [factor, divisor] : {std::pair<double, int>{1.0 / world, 1},
                                 std::pair<double, int>{1.0, world}})
    for (DataType dtype :
         {DataType::kFloat32, DataType::kInt32, DataType::kBFloat16}) {
      CollectiveOptions options = Options(*mesh);
      options.postscale = factor;
      options.divisor = divisor;
      std::vector<char> want =
          Expected(dtype, ReduceOp::kSum, all_ranks, count);
      Postscale(want.data(), count, dtype, factor, divisor);
      std::vector<std::string> bad(world);
      auto statuses = mesh->RunAll([&](int rank, transport::Context& context) {
        std::vector<char> data = MakeInput(dtype, ReduceOp::kSum, rank, count);
        absl::Status status =
            Allreduce(context, Group::All(context), data.data(), count, dtype,
                      ReduceOp::kSum, options);
        bad[rank] =
            Mismatch(absl::StrCat("rank ", rank, " ", DataTypeName(dtype)),
                     dtype, data.data(), want.data(), count);
        return status;
      });
      EXPECT_EQ(FailedRanks(all_ranks, statuses), "");
      for (const std::string& m : bad) EXPECT_EQ(m, "");
    }
}

TEST_P(AllreduceTest, ManyPiecesReduceAsOneBuffer) {
  const size_t count = this->count();
  // Uneven pieces, some empty, some smaller than a chunk, one spanning many.
  std::vector<size_t> split;
  for (size_t left = count, i = 0; left > 0; ++i) {
    const size_t n = std::min(left, i % 4 == 1 ? size_t{0} : (i * 7919) % 9001);
    split.push_back(n);
    left -= n;
  }
  ExpectHalvedSumOnEveryRank([&](transport::Context& context,
                                 const CollectiveOptions& options,
                                 const std::vector<char>& input,
                                 std::vector<char>* got, std::string*) {
    std::vector<std::vector<char>> buffers;
    std::vector<AllreducePiece> pieces;
    size_t at = 0;
    for (size_t n : split) {
      buffers.emplace_back(input.begin() + at * 4,
                           input.begin() + (at + n) * 4);
      at += n;
    }
    for (size_t i = 0; i < split.size(); ++i) {
      pieces.push_back({buffers[i].data(), buffers[i].data(), split[i]});
    }
    absl::Status status =
        AllreduceMany(context, Group::All(context), pieces, DataType::kFloat32,
                      ReduceOp::kSum, options);
    for (const auto& b : buffers) got->insert(got->end(), b.begin(), b.end());
    return status;
  });
}

// Every other piece out of place, its output full of garbage: the outputs
// get the reduction, the inputs stay as they were.
TEST_P(AllreduceTest, PiecesOutOfPlaceLeaveTheirInputsAsTheyWere) {
  const size_t count = this->count();
  const std::vector<size_t> split = {count / 3, 0, count / 2,
                                     count - count / 3 - count / 2};
  ExpectHalvedSumOnEveryRank([&](transport::Context& context,
                                 const CollectiveOptions& options,
                                 const std::vector<char>& input,
                                 std::vector<char>* got, std::string* bad) {
    std::vector<std::vector<char>> inputs, outputs;
    std::vector<AllreducePiece> pieces;
    size_t at = 0;
    for (size_t i = 0; i < split.size(); ++i) {
      inputs.emplace_back(input.begin() + at * 4,
                          input.begin() + (at + split[i]) * 4);
      outputs.emplace_back(split[i] * 4, i % 2 == 0 ? char{-1} : char{0});
      at += split[i];
    }
    for (size_t i = 0; i < split.size(); ++i) {
      void* output = i % 2 == 0 ? outputs[i].data() : inputs[i].data();
      pieces.push_back({inputs[i].data(), output, split[i]});
    }
    absl::Status status =
        AllreduceMany(context, Group::All(context), pieces, DataType::kFloat32,
                      ReduceOp::kSum, options);
    bool inputs_kept = true;
    at = 0;
    for (size_t i = 0; i < split.size(); ++i) {
      const std::vector<char>& out = i % 2 == 0 ? outputs[i] : inputs[i];
      got->insert(got->end(), out.begin(), out.end());
      if (i % 2 == 0) {
        inputs_kept =
            inputs_kept && std::equal(inputs[i].begin(), inputs[i].end(),
                                      input.begin() + at * 4);
      }
      at += split[i];
    }
    if (!inputs_kept) *bad = "an input was written";
    return status;
  });
}

INSTANTIATE_TEST_SUITE_P(
    WorldCountAlgorithm, AllreduceTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(size_t{0}, size_t{1}, size_t{1001},
                                         kLargeCount),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kDirect),
                       ::testing::Values(MeshTransport::kTcp)),
    CaseName);

// Recursive doubling at every world size up to 8: powers of two, and the
// others, whose first members fold in pairs before the rounds.
INSTANTIATE_TEST_SUITE_P(
    RecursiveDoubling, AllreduceTest,
    ::testing::Combine(
        ::testing::Values(2, 3, 5, 6, 7, 8),
        ::testing::Values(size_t{1}, size_t{1001}, kLargeCount),
        ::testing::Values(AllreduceAlgorithm::kRecursiveDoubling),
        ::testing::Values(MeshTransport::kTcp, MeshTransport::kShm)),
    CaseName);

// Over the RDMA transport (libfabric's tcp provider): odd and even worlds.
INSTANTIATE_TEST_SUITE_P(
    OverRdma, AllreduceTest,
    ::testing::Combine(::testing::Values(2, 3, 4),
                       ::testing::Values(size_t{0}, size_t{1001}, kLargeCount),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kDirect),
                       ::testing::Values(MeshTransport::kRdma)),
    CaseName);

// Shared memory alone (one host) and mixed with TCP (hosts of two ranks:
// world 3 leaves hosts uneven, so kHierarchical falls back to the ring).
INSTANTIATE_TEST_SUITE_P(
    SharedMemoryAndMixed, AllreduceTest,
    ::testing::Combine(::testing::Values(2, 3, 4, 8),
                       ::testing::Values(size_t{0}, size_t{1001}, kLargeCount),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kDirect,
                                         AllreduceAlgorithm::kHierarchical),
                       ::testing::Values(MeshTransport::kShm,
                                         MeshTransport::kMixed)),
    CaseName);

// Every rank its own host: the hierarchical algorithm is its cross-host
// step alone.
INSTANTIATE_TEST_SUITE_P(
    HierarchicalOverTcp, AllreduceTest,
    ::testing::Combine(::testing::Values(1, 4),
                       ::testing::Values(size_t{1}, kLargeCount),
                       ::testing::Values(AllreduceAlgorithm::kHierarchical),
                       ::testing::Values(MeshTransport::kTcp)),
    CaseName);

// Three members per host, hosts interleaved in rank order, and a group that
// takes two of each host's ranks in a scrambled order.
TEST(AllreduceHierarchical, InterleavedHostsAndScrambledGroups) {
  auto mesh = TestMesh::CreateOnHosts({0, 1, 0, 1, 0, 1});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  for (const std::vector<int>& ranks :
       {std::vector<int>{0, 1, 2, 3, 4, 5}, std::vector<int>{5, 2, 1, 0}}) {
    for (size_t count : {size_t{2}, size_t{70001}}) {
      CollectiveOptions options;
      options.algorithm = AllreduceAlgorithm::kHierarchical;
      options.chunk_bytes = 4096;
      options.hosts = (*mesh)->hosts();
      const auto want =
          Expected(DataType::kInt32, ReduceOp::kSum, ranks, count);
      std::vector<std::string> bad(ranks.size());
      auto statuses =
          (*mesh)->Run(ranks, [&](int rank, transport::Context& context) {
            const Group group = GroupOf(ranks, rank);
            auto data =
                MakeInput(DataType::kInt32, ReduceOp::kSum, rank, count);
            absl::Status status =
                Allreduce(context, group, data.data(), count, DataType::kInt32,
                          ReduceOp::kSum, options);
            bad[group.index] =
                Mismatch(absl::StrCat("rank ", rank), DataType::kInt32,
                         data.data(), want.data(), count);
            return status;
          });
      EXPECT_EQ(FailedRanks(ranks, statuses), "") << ranks.size() << " ranks";
      for (const std::string& m : bad) EXPECT_EQ(m, "");
    }
  }
}

TEST(AllreduceHierarchical, AutoPicksItForSeveralHostsOfSeveralRanks) {
  // The algorithm shows in the error of a member whose peers never join.
  auto mesh = TestMesh::Create(4, MeshTransport::kMixed);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  CollectiveOptions options;
  options.small_message_bytes = 4000;
  options.cross_host_small_message_bytes = 4000;
  options.timeout = absl::Milliseconds(200);
  options.hosts = (*mesh)->hosts();
  std::vector<float> data(1001, 1.0f);
  transport::Context& context = (*mesh)->context(0);
  absl::Status status =
      Allreduce(context, Group::All(context), data.data(), data.size(),
                DataType::kFloat32, ReduceOp::kSum, options);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(
      std::string(status.message()),
      StartsWith("Allreduce (hierarchical) on rank 0 (member 0 of 4): "));
  // One rank per host, or uneven hosts: the ring.
  options.hosts = {0, 1, 2, 3};
  status = Allreduce(context, Group::All(context), data.data(), data.size(),
                     DataType::kFloat32, ReduceOp::kSum, options);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("Allreduce (ring) on rank 0 (member 0 of 4): "));
  options.hosts = {0, 0, 0, 1};
  status = Allreduce(context, Group::All(context), data.data(), data.size(),
                     DataType::kFloat32, ReduceOp::kSum, options);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("Allreduce (ring) on rank 0 (member 0 of 4): "));
}

// Runs a float32 Sum allreduce of `count` elements on every member of
// `ranks` (a group of the 4-rank mesh) and checks the result.
void ExpectGroupAllreduce(TestMesh& mesh, const std::vector<int>& ranks,
                          size_t count, AllreduceAlgorithm algorithm) {
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.chunk_bytes = 1000;
  options.timeout = absl::Seconds(30);
  const auto want = Expected(DataType::kFloat32, ReduceOp::kSum, ranks, count);
  std::vector<std::string> bad(ranks.size());
  auto statuses = mesh.Run(ranks, [&](int rank, transport::Context& context) {
    const Group group = GroupOf(ranks, rank);
    auto data = MakeInput(DataType::kFloat32, ReduceOp::kSum, rank, count);
    absl::Status status =
        Allreduce(context, group, data.data(), count, DataType::kFloat32,
                  ReduceOp::kSum, options);
    bad[group.index] = Mismatch(absl::StrCat("rank ", rank), DataType::kFloat32,
                                data.data(), want.data(), count);
    return status;
  });
  EXPECT_EQ(FailedRanks(ranks, statuses), "");
  for (const std::string& m : bad) EXPECT_EQ(m, "");
}

TEST(AllreduceGroup, OnlyMembersTakePart) {
  TestMesh* mesh = TestMesh::Shared(4);
  ASSERT_NE(mesh, nullptr);
  for (auto algorithm :
       {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kDirect}) {
    ExpectGroupAllreduce(*mesh, {1, 3}, 10007, algorithm);
    ExpectGroupAllreduce(*mesh, {0, 2, 3}, 10007, algorithm);
    ExpectGroupAllreduce(*mesh, {3, 0, 1}, 5, algorithm);  // Any order.
    ExpectGroupAllreduce(*mesh, {2}, 5, algorithm);
  }
}

TEST(AllreduceGroup, DisjointGroupsRunConcurrently) {
  TestMesh* mesh = TestMesh::Shared(4);
  ASSERT_NE(mesh, nullptr);
  std::thread other([&] {
    ExpectGroupAllreduce(*mesh, {0, 2}, 30011, AllreduceAlgorithm::kRing);
  });
  ExpectGroupAllreduce(*mesh, {3, 1}, 30011, AllreduceAlgorithm::kRing);
  other.join();
}

TEST(AllreduceAuto, SwitchesToRingAboveSmallMessageBytes) {
  // The algorithm shows in the error of a member whose peer never joins.
  for (size_t count : {1000, 1001}) {
    auto mesh = TestMesh::Create(2);
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    CollectiveOptions options;
    options.small_message_bytes = 4000;
    options.timeout = absl::Milliseconds(200);
    std::vector<float> data(count, 1.0f);
    transport::Context& context = (*mesh)->context(0);
    absl::Status status =
        Allreduce(context, Group::All(context), data.data(), count,
                  DataType::kFloat32, ReduceOp::kSum, options);
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_THAT(
        std::string(status.message()),
        StartsWith(count == 1000
                       ? "Allreduce (direct) on rank 0 (member 0 of 2): "
                       : "Allreduce (ring) on rank 0 (member 0 of 2): "));
  }
}

// Past 64 members a small allreduce takes recursive doubling, whose peers
// grow as log2 N, instead of the direct round's N - 1; and it is right
// there, 70 members being 64 doubling after 6 pairs folded.
TEST(AllreduceAuto, GroupsOfMoreThanSixtyFourMembersTakeRecursiveDoubling) {
  constexpr int kMembers = 70;
  auto mesh = TestMesh::Create(kMembers);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  constexpr size_t kCount = 1001;
  std::vector<int> all(kMembers);
  for (int r = 0; r < kMembers; ++r) all[r] = r;
  const std::vector<char> want =
      Expected(DataType::kFloat32, ReduceOp::kSum, all, kCount);
  std::vector<std::string> bad(kMembers);
  auto statuses = (*mesh)->RunAll([&](int rank, transport::Context& context) {
    std::vector<char> data =
        MakeInput(DataType::kFloat32, ReduceOp::kSum, rank, kCount);
    absl::Status status =
        Allreduce(context, Group::All(context), data.data(), kCount,
                  DataType::kFloat32, ReduceOp::kSum, CollectiveOptions());
    bad[rank] = Mismatch(absl::StrCat("rank ", rank), DataType::kFloat32,
                         data.data(), want.data(), kCount);
    return status;
  });
  EXPECT_EQ(FailedRanks(all, statuses), "");
  for (const std::string& m : bad) EXPECT_EQ(m, "");
  // Which algorithm ran shows in the error of a member left alone.
  CollectiveOptions options;
  options.timeout = absl::Milliseconds(200);
  transport::Context& context = (*mesh)->context(0);
  for (int members : {64, 65}) {
    const Group group{std::vector<int>(all.begin(), all.begin() + members), 0};
    float x = 1.0f;
    absl::Status status = Allreduce(context, group, &x, 1, DataType::kFloat32,
                                    ReduceOp::kSum, options);
    EXPECT_THAT(std::string(status.message()),
                StartsWith(absl::StrCat(
                    members == 64 ? "Allreduce (direct)"
                                  : "Allreduce (recursive doubling)",
                    " on rank 0 (member 0 of ", members, "): ")));
  }
}

TEST(AllreduceAuto, GroupsAcrossHostsLeaveDirectSooner) {
  auto mesh = TestMesh::Create(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  CollectiveOptions options;
  options.small_message_bytes = 8000;
  options.cross_host_small_message_bytes = 4000;
  options.timeout = absl::Milliseconds(200);
  std::vector<float> data(1001, 1.0f);  // 4004 bytes
  transport::Context& context = (*mesh)->context(0);
  for (const auto& [hosts, algorithm] :
       {std::pair<std::vector<int>, std::string>{{0, 1}, "ring"},
        {{5, 5}, "direct"},
        {{}, "direct"}}) {
    options.hosts = hosts;
    absl::Status status =
        Allreduce(context, Group::All(context), data.data(), data.size(),
                  DataType::kFloat32, ReduceOp::kSum, options);
    EXPECT_THAT(std::string(status.message()),
                StartsWith(absl::StrCat("Allreduce (", algorithm,
                                        ") on rank 0 (member 0 of 2): ")));
  }
}

TEST(AllreduceErrors, AbortedContextFailsWithItsReasonOnBothSides) {
  auto mesh = TestMesh::Create(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  (*mesh)->context(1).Abort(absl::CancelledError("test aborted rank 1"));
  CollectiveOptions options;
  options.algorithm = AllreduceAlgorithm::kRing;
  options.timeout = absl::Seconds(10);
  auto statuses = (*mesh)->RunAll([&](int, transport::Context& context) {
    std::vector<float> data(100000, 1.0f);
    return Allreduce(context, Group::All(context), data.data(), data.size(),
                     DataType::kFloat32, ReduceOp::kSum, options);
  });
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kCancelled) << statuses[1];
  EXPECT_THAT(std::string(statuses[1].message()),
              StartsWith("Allreduce (ring) on rank 1 (member 1 of 2): "));
  EXPECT_THAT(std::string(statuses[1].message()),
              HasSubstr("test aborted rank 1"));
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_THAT(std::string(statuses[0].message()),
              StartsWith("Allreduce (ring) on rank 0 (member 0 of 2): "));
}

TEST(AllreduceErrors, RejectsAverageAndAdasum) {
  TestMesh* mesh = TestMesh::Shared(2);
  ASSERT_NE(mesh, nullptr);
  transport::Context& context = mesh->context(0);
  float x = 1;
  absl::Status status = Allreduce(context, Group::All(context), &x, 1,
                                  DataType::kFloat32, ReduceOp::kAverage, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "Allreduce: op Average is not Sum, Min, Max or Product");
  status = Allreduce(context, Group::All(context), &x, 1, DataType::kFloat32,
                     ReduceOp::kAdasum, {});
  EXPECT_EQ(status.message(),
            "Allreduce: op Adasum is not Sum, Min, Max or Product");
}

TEST(AllreduceErrors, RejectsGroupThatDoesNotMatchContext) {
  TestMesh* mesh = TestMesh::Shared(2);
  ASSERT_NE(mesh, nullptr);
  transport::Context& context = mesh->context(0);
  float x = 1;
  absl::Status status = Allreduce(context, Group{{0, 1}, 1}, &x, 1,
                                  DataType::kFloat32, ReduceOp::kSum, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "Allreduce: group member 1 is rank 1 but this context is rank 0");
  status = Allreduce(context, Group{{0, 5}, 0}, &x, 1, DataType::kFloat32,
                     ReduceOp::kSum, {});
  EXPECT_EQ(status.message(),
            "Allreduce: group member rank 5 is outside the context of size 2");
  status = Allreduce(context, Group{{0, 1}, 2}, &x, 1, DataType::kFloat32,
                     ReduceOp::kSum, {});
  EXPECT_EQ(status.message(),
            "Allreduce: group index 2 is outside a group of 2");
  status = Allreduce(context, Group{{0, 0}, 0}, &x, 1, DataType::kFloat32,
                     ReduceOp::kSum, {});
  EXPECT_EQ(status.message(), "Allreduce: group lists rank 0 twice");
  // Out of order, the twice-listed rank apart.
  status = Allreduce(context, Group{{1, 0, 1}, 1}, &x, 1, DataType::kFloat32,
                     ReduceOp::kSum, {});
  EXPECT_EQ(status.message(), "Allreduce: group lists rank 1 twice");
}

}  // namespace
}  // namespace hvd::collectives
