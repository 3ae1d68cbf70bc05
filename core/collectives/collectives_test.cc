// Allgather, Broadcast, Alltoall and ReduceScatter over the real TCP
// transport, one thread per rank, for world sizes 1-8 with every algorithm,
// on the whole world and on process-set groups.
#include "core/collectives/collectives.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/collectives/test_mesh.h"
#include "core/collectives/test_values.h"
#include "core/common/sanitizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::collectives {
namespace {

// Per-member data beyond this, in 16 KiB chunks; a sanitized build keeps
// that shape at an eighth of the size.
constexpr size_t kScale = kSanitizedBuild ? 8 : 1;
constexpr size_t kLarge = (size_t{1} << 20) / kScale;
constexpr size_t kLargeChunkBytes = (size_t{16} << 10) / kScale;
// Outputs start as this, not zero, so that a stray reduction into them shows.
constexpr char kFill = 0x5a;

CollectiveOptions Options(AllreduceAlgorithm algorithm, bool large) {
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.chunk_bytes = large ? kLargeChunkBytes : 1000;
  options.timeout = absl::Seconds(30);
  return options;
}

std::vector<char> Concat(const std::vector<std::vector<char>>& parts) {
  std::vector<char> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// ----- Allgather ------------------------------------------------------------

void ExpectAllgather(TestMesh& mesh, const std::vector<int>& ranks,
                     const std::vector<size_t>& bytes,
                     const CollectiveOptions& options, bool in_place) {
  std::vector<std::vector<char>> inputs;
  for (size_t i = 0; i < ranks.size(); ++i) {
    inputs.push_back(Pattern(ranks[i], bytes[i]));
  }
  const std::vector<char> want = Concat(inputs);
  std::vector<std::string> bad(ranks.size());
  auto statuses = mesh.Run(ranks, [&](int rank, transport::Context& context) {
    const Group group = GroupOf(ranks, rank);
    std::vector<char> output(want.size(), kFill);
    const void* input = inputs[group.index].data();
    if (in_place) {
      const size_t offset =
          std::accumulate(bytes.begin(), bytes.begin() + group.index, 0ul);
      std::copy(inputs[group.index].begin(), inputs[group.index].end(),
                output.begin() + offset);
      input = output.data() + offset;
    }
    absl::Status status =
        Allgather(context, group, input, output.data(), bytes, options);
    bad[group.index] =
        Mismatch(absl::StrCat("allgather rank ", rank), DataType::kUint8,
                 output.data(), want.data(), want.size());
    return status;
  });
  EXPECT_EQ(FailedRanks(ranks, statuses), "");
  for (const std::string& m : bad) EXPECT_EQ(m, "");
}

// Sizes differ per member; every third member contributes nothing.
std::vector<size_t> AllgatherSizes(int n, size_t base) {
  std::vector<size_t> bytes(n);
  for (int i = 0; i < n; ++i) bytes[i] = i % 3 == 1 ? 0 : base + 1001 * i;
  return bytes;
}

// ----- Broadcast ------------------------------------------------------------

void ExpectBroadcast(TestMesh& mesh, const std::vector<int>& ranks, int root,
                     size_t bytes, const CollectiveOptions& options) {
  const std::vector<char> want = Pattern(100 + root, bytes);
  std::vector<std::string> bad(ranks.size());
  auto statuses = mesh.Run(ranks, [&](int rank, transport::Context& context) {
    const Group group = GroupOf(ranks, rank);
    std::vector<char> data =
        group.index == root ? want : std::vector<char>(bytes, kFill);
    absl::Status status =
        Broadcast(context, group, data.data(), bytes, root, options);
    bad[group.index] =
        Mismatch(absl::StrCat("broadcast from ", root, " rank ", rank),
                 DataType::kUint8, data.data(), want.data(), bytes);
    return status;
  });
  EXPECT_EQ(FailedRanks(ranks, statuses), "");
  for (const std::string& m : bad) EXPECT_EQ(m, "");
}

// ----- Alltoall -------------------------------------------------------------

// Bytes member i sends member j: uneven, some zero (including to itself).
size_t AlltoallBytes(int i, int j, size_t scale) {
  if ((i + 2 * j) % 4 == 0) return 0;
  return (1 + (i * 7 + j * 13) % 50) * scale;
}

void ExpectAlltoall(TestMesh& mesh, const std::vector<int>& ranks, size_t scale,
                    const CollectiveOptions& options) {
  const int n = static_cast<int>(ranks.size());
  std::vector<std::string> bad(n);
  auto statuses = mesh.Run(ranks, [&](int rank, transport::Context& context) {
    const Group group = GroupOf(ranks, rank);
    const int me = group.index;
    std::vector<size_t> send_bytes(n), recv_bytes(n);
    std::vector<std::vector<char>> sends(n), wants(n);
    for (int j = 0; j < n; ++j) {
      send_bytes[j] = AlltoallBytes(me, j, scale);
      recv_bytes[j] = AlltoallBytes(j, me, scale);
      sends[j] = Pattern(me * 16 + j, send_bytes[j]);
      wants[j] = Pattern(j * 16 + me, recv_bytes[j]);
    }
    const std::vector<char> input = Concat(sends), want = Concat(wants);
    std::vector<char> output(want.size(), kFill);
    absl::Status status = Alltoall(context, group, input.data(), send_bytes,
                                   output.data(), recv_bytes, options);
    bad[me] = Mismatch(absl::StrCat("alltoall rank ", rank), DataType::kUint8,
                       output.data(), want.data(), want.size());
    return status;
  });
  EXPECT_EQ(FailedRanks(ranks, statuses), "");
  for (const std::string& m : bad) EXPECT_EQ(m, "");
}

// ----- ReduceScatter --------------------------------------------------------

// Uneven counts; every third member's block is empty.
std::vector<size_t> ReduceScatterCounts(int n, size_t base) {
  std::vector<size_t> counts(n);
  for (int i = 0; i < n; ++i) counts[i] = i % 3 == 2 ? 0 : base + 501 * i;
  return counts;
}

void ExpectReduceScatter(TestMesh& mesh, const std::vector<int>& ranks,
                         const std::vector<size_t>& counts, DataType dtype,
                         ReduceOp op, const CollectiveOptions& options) {
  const size_t total = std::accumulate(counts.begin(), counts.end(), 0ul);
  const size_t size = DataTypeSize(dtype);
  const std::vector<char> want = Expected(dtype, op, ranks, total);
  std::vector<std::string> bad(ranks.size());
  auto statuses = mesh.Run(ranks, [&](int rank, transport::Context& context) {
    const Group group = GroupOf(ranks, rank);
    const std::vector<char> input = MakeInput(dtype, op, rank, total);
    const size_t count = counts[group.index];
    const size_t offset =
        std::accumulate(counts.begin(), counts.begin() + group.index, 0ul);
    std::vector<char> output(count * size, kFill);
    absl::Status status =
        ReduceScatter(context, group, input.data(), output.data(), counts,
                      dtype, op, options);
    bad[group.index] = Mismatch(
        absl::StrCat("reducescatter ", ReduceOpName(op), " rank ", rank), dtype,
        output.data(), want.data() + offset * size, count);
    if (input != MakeInput(dtype, op, rank, total)) {
      bad[group.index] += absl::StrCat(" rank ", rank, ": input changed");
    }
    return status;
  });
  EXPECT_EQ(FailedRanks(ranks, statuses), "");
  for (const std::string& m : bad) EXPECT_EQ(m, "");
}

// ----- Whole world, parametrised --------------------------------------------

using WorldCase = std::tuple<int, AllreduceAlgorithm, MeshTransport>;

std::string CaseName(const ::testing::TestParamInfo<WorldCase>& info) {
  const auto [world, algorithm, transport] = info.param;
  return absl::StrCat("World", world, AlgorithmName(algorithm),
                      MeshTransportName(transport));
}

class CollectivesTest : public ::testing::TestWithParam<WorldCase> {
 protected:
  void SetUp() override {
    mesh_ = TestMesh::Shared(world(), std::get<2>(GetParam()));
    ASSERT_NE(mesh_, nullptr);
    ranks_.resize(world());
    std::iota(ranks_.begin(), ranks_.end(), 0);
  }
  int world() const { return std::get<0>(GetParam()); }
  CollectiveOptions options(bool large) const {
    return Options(std::get<1>(GetParam()), large);
  }

  TestMesh* mesh_ = nullptr;
  std::vector<int> ranks_;
};

TEST_P(CollectivesTest, AllgatherOfDifferentSizesIncludingEmpty) {
  ExpectAllgather(*mesh_, ranks_, AllgatherSizes(world(), 1), options(false),
                  false);
  ExpectAllgather(*mesh_, ranks_, AllgatherSizes(world(), 3000), options(false),
                  true);
  ExpectAllgather(*mesh_, ranks_, std::vector<size_t>(world(), 0),
                  options(false), false);
}

TEST_P(CollectivesTest, AllgatherLargerThanFusionThreshold) {
  ExpectAllgather(*mesh_, ranks_, AllgatherSizes(world(), kLarge / 2),
                  options(true), false);
}

TEST_P(CollectivesTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < world(); ++root) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{1001}}) {
      ExpectBroadcast(*mesh_, ranks_, root, bytes, options(false));
    }
    ExpectBroadcast(*mesh_, ranks_, root, kLarge + 7, options(true));
  }
}

TEST_P(CollectivesTest, AlltoallWithUnevenAndZeroBlocks) {
  ExpectAlltoall(*mesh_, ranks_, 1, options(false));
  ExpectAlltoall(*mesh_, ranks_, 20011, options(true));
}

TEST_P(CollectivesTest, ReduceScatterEveryDtypeAndOpWithUnevenCounts) {
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllOps) {
      ExpectReduceScatter(*mesh_, ranks_, ReduceScatterCounts(world(), 3),
                          dtype, op, options(false));
    }
  }
}

TEST_P(CollectivesTest, ReduceScatterLargerThanFusionThreshold) {
  for (DataType dtype : {DataType::kFloat32, DataType::kInt8}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct}) {
      ExpectReduceScatter(*mesh_, ranks_,
                          ReduceScatterCounts(world(), kLarge / 4 / world()),
                          dtype, op, options(true));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorldAlgorithm, CollectivesTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kDirect),
                       ::testing::Values(MeshTransport::kTcp)),
    CaseName);

// The log N algorithms, at every size (kRecursiveDoubling forces them):
// powers of two and the worlds whose first members fold in pairs.
INSTANTIATE_TEST_SUITE_P(
    RecursiveDoubling, CollectivesTest,
    ::testing::Combine(
        ::testing::Values(2, 3, 5, 6, 7, 8),
        ::testing::Values(AllreduceAlgorithm::kRecursiveDoubling),
        ::testing::Values(MeshTransport::kTcp, MeshTransport::kShm)),
    CaseName);

INSTANTIATE_TEST_SUITE_P(
    OverRdma, CollectivesTest,
    ::testing::Combine(::testing::Values(2, 3, 8),
                       ::testing::Values(AllreduceAlgorithm::kRing),
                       ::testing::Values(MeshTransport::kRdma)),
    CaseName);

INSTANTIATE_TEST_SUITE_P(
    SharedMemoryAndMixed, CollectivesTest,
    ::testing::Combine(::testing::Values(2, 3, 8),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kDirect),
                       ::testing::Values(MeshTransport::kShm,
                                         MeshTransport::kMixed)),
    CaseName);

// Past 64 members the small collectives take their log N algorithms under
// kAuto (the whole world of 70: 64 doubling after 6 pairs folded).
TEST(CollectivesAuto, GroupsOfMoreThanSixtyFourMembersTakeTheLogNAlgorithms) {
  constexpr int kMembers = 70;
  auto mesh = TestMesh::Create(kMembers);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<int> all(kMembers);
  std::iota(all.begin(), all.end(), 0);
  const CollectiveOptions options = Options(AllreduceAlgorithm::kAuto, false);
  // Small totals (under small_message_bytes), some members' blocks empty.
  std::vector<size_t> bytes(kMembers), counts(kMembers);
  for (int i = 0; i < kMembers; ++i) {
    bytes[i] = i % 3 == 1 ? 0 : 10 + i;
    counts[i] = i % 3 == 2 ? 0 : 1 + i % 5;
  }
  ExpectAllgather(**mesh, all, bytes, options, false);
  ExpectBroadcast(**mesh, all, 37, 1001, options);
  ExpectReduceScatter(**mesh, all, counts, DataType::kFloat32, ReduceOp::kSum,
                      options);
  // Which algorithm ran shows in the error of a member left alone.
  CollectiveOptions alone = options;
  alone.timeout = absl::Milliseconds(200);
  transport::Context& context = (*mesh)->context(1);
  for (int members : {64, 65}) {
    const Group group{std::vector<int>(all.begin(), all.begin() + members), 1};
    char byte = 0;
    absl::Status status = Broadcast(context, group, &byte, 1, 0, alone);
    EXPECT_THAT(std::string(status.message()),
                ::testing::StartsWith(absl::StrCat(
                    members == 64 ? "Broadcast (direct)" : "Broadcast (tree)",
                    " on rank 1 (member 1 of ", members, "): ")));
  }
}

// ----- Process sets ---------------------------------------------------------

TEST(CollectivesGroup, OnlyMembersTakePart) {
  TestMesh* mesh = TestMesh::Shared(4);
  ASSERT_NE(mesh, nullptr);
  for (AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kDirect,
        AllreduceAlgorithm::kRecursiveDoubling}) {
    for (const std::vector<int>& ranks :
         {std::vector<int>{1, 3}, std::vector<int>{0, 2, 3},
          std::vector<int>{3, 0, 1}}) {
      const int n = static_cast<int>(ranks.size());
      SCOPED_TRACE(absl::StrCat("group of ", n, " starting at ", ranks[0]));
      ExpectAllgather(*mesh, ranks, AllgatherSizes(n, 5000),
                      Options(algorithm, false), false);
      for (int root = 0; root < n; ++root) {
        ExpectBroadcast(*mesh, ranks, root, 5003, Options(algorithm, false));
      }
      ExpectAlltoall(*mesh, ranks, 101, Options(algorithm, false));
      ExpectReduceScatter(*mesh, ranks, ReduceScatterCounts(n, 777),
                          DataType::kInt32, ReduceOp::kSum,
                          Options(algorithm, false));
    }
  }
}

// ----- Hierarchical allgather -----------------------------------------------

CollectiveOptions Hierarchical(const std::vector<int>& hosts) {
  CollectiveOptions options = Options(AllreduceAlgorithm::kAuto, false);
  options.hierarchical_allgather = true;
  options.small_message_bytes = 0;  // no direct round, whatever the size
  options.cross_host_small_message_bytes = 0;
  options.hosts = hosts;
  return options;
}

// Hosts interleaved in rank order, uneven and empty blocks, in place and
// not, and a group of two members per host in a scrambled order.
TEST(AllgatherHierarchical, InterleavedHostsUnevenBlocksAndScrambledGroups) {
  auto mesh = TestMesh::CreateOnHosts({0, 1, 0, 1, 0, 1});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  for (const std::vector<int>& ranks :
       {std::vector<int>{0, 1, 2, 3, 4, 5}, std::vector<int>{5, 2, 1, 0}}) {
    const int n = static_cast<int>(ranks.size());
    for (size_t base : {size_t{1}, size_t{70001}}) {
      SCOPED_TRACE(absl::StrCat(n, " members, blocks from ", base));
      for (bool in_place : {false, true}) {
        ExpectAllgather(**mesh, ranks, AllgatherSizes(n, base),
                        Hierarchical((*mesh)->hosts()), in_place);
      }
      ExpectAllgather(**mesh, ranks, std::vector<size_t>(n, 0),
                      Hierarchical((*mesh)->hosts()), false);
    }
  }
}

// The algorithm shows in the error of a member whose peers never join.
std::string AlgorithmOfAllgather(TestMesh& mesh, CollectiveOptions options) {
  options.timeout = absl::Milliseconds(200);
  transport::Context& context = mesh.context(0);
  std::vector<char> in(1000, 1), out(4000);
  absl::Status status =
      Allgather(context, Group::All(context), in.data(), out.data(),
                {1000, 1000, 1000, 1000}, options);
  const std::string message(status.message());
  return message.substr(0, message.find(" on rank 0"));
}

TEST(AllgatherHierarchical, TakenOnlyForSeveralHostsOfSeveralMembers) {
  auto mesh = TestMesh::Create(4, MeshTransport::kMixed);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const std::vector<int>& hosts = (*mesh)->hosts();
  EXPECT_EQ(AlgorithmOfAllgather(**mesh, Hierarchical(hosts)),
            "Allgather (hierarchical)");
  CollectiveOptions flat = Hierarchical(hosts);
  flat.hierarchical_allgather = false;
  EXPECT_EQ(AlgorithmOfAllgather(**mesh, flat), "Allgather (ring)");
  for (const std::vector<int>& other :
       {std::vector<int>{0, 1, 2, 3}, std::vector<int>{0, 0, 0, 1},
        std::vector<int>{0, 0, 0, 0}}) {
    EXPECT_EQ(AlgorithmOfAllgather(**mesh, Hierarchical(other)),
              "Allgather (ring)");
  }
}

// ----- A peer that never comes ---------------------------------------------

// Past the stall warning time, the waiting member names the peer and what is
// missing, once, and fails only at the timeout.
TEST(CollectivesStall, AWaitPastTheStallTimeNamesThePeerAndGoesOn) {
  auto mesh = TestMesh::Create(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  CollectiveOptions options;
  options.stall_warning = absl::Milliseconds(100);
  options.timeout = absl::Milliseconds(400);
  transport::Context& context = (*mesh)->context(0);
  std::vector<char> data(64, 1);
  ::testing::internal::CaptureStderr();
  const absl::Time start = absl::Now();
  absl::Status status = Broadcast(context, Group::All(context), data.data(),
                                  data.size(), 1, options);
  const absl::Duration took = absl::Now() - start;
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_GE(took, absl::Milliseconds(400));
  EXPECT_THAT(log, ::testing::HasSubstr(absl::StrCat(
                       "WARNING] Stall detected: a transfer has waited 100ms: "
                       "rank 0: Recv from rank 1 (",
                       context.PeerAddress(1),
                       ") not complete by the deadline: 0 of 64 bytes "
                       "transferred; it fails after 400ms\n")));
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

// ----- Argument errors ------------------------------------------------------

TEST(CollectivesErrors, RejectMismatchedSizesAndRoots) {
  TestMesh* mesh = TestMesh::Shared(2);
  ASSERT_NE(mesh, nullptr);
  transport::Context& context = mesh->context(0);
  const Group group = Group::All(context);
  char buffer[8] = {};
  absl::Status status = Allgather(context, group, buffer, buffer, {1}, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "Allgather: 1 block sizes given for a group of 2");
  status = Broadcast(context, group, buffer, 1, 2, {});
  EXPECT_EQ(status.message(), "Broadcast: root 2 is outside a group of 2");
  status = Alltoall(context, group, buffer, {1, 1}, buffer, {1}, {});
  EXPECT_EQ(status.message(),
            "Alltoall: 2 send and 1 receive sizes given for a group of 2");
  status = Alltoall(context, group, buffer, {2, 1}, buffer, {1, 1}, {});
  EXPECT_EQ(status.message(),
            "Alltoall: member 0 sends itself 2 bytes but expects 1");
  status = ReduceScatter(context, group, buffer, buffer, {1, 1, 1},
                         DataType::kUint8, ReduceOp::kSum, {});
  EXPECT_EQ(status.message(), "ReduceScatter: 3 counts given for a group of 2");
  status = ReduceScatter(context, group, buffer, buffer, {1, 1},
                         DataType::kFloat32, ReduceOp::kAverage, {});
  EXPECT_EQ(status.message(),
            "ReduceScatter: op Average is not Sum, Min, Max or Product");
}

}  // namespace
}  // namespace hvd::collectives
