#include "core/gpu/topology.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/rendezvous/grpc_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/rendezvous/rendezvous_server.h"

namespace hvd::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<MemberInfo> Members(
    std::vector<std::pair<std::string, std::string>> host_gpu) {
  std::vector<MemberInfo> out;
  for (auto& [host, gpu] : host_gpu) out.push_back({host, gpu});
  return out;
}

TEST(ChoosePath, OneGpuPerMemberTakesNccl) {
  auto choice = ChoosePath(Members({{"a", "gpu0"}, {"a", "gpu1"}}), 1, {});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_TRUE(choice->nccl);
  EXPECT_FALSE(choice->hierarchical);
}

TEST(ChoosePath, MembersSharingAGpuTakeTheStagedPath) {
  auto choice =
      ChoosePath(Members({{"a", "gpu0"}, {"a", "gpu1"}, {"a", "gpu0"}}), 0, {});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_FALSE(choice->nccl);
  EXPECT_THAT(choice->reason,
              HasSubstr("members 0 and 2 share GPU gpu0 on host a"));
}

TEST(ChoosePath, OneGpuUnderTwoHostNamesIsSharedAndTakesTheStagedPath) {
  // The identity is the GPU's UUID: one device, whatever the host is called
  // (two containers given one GPU, an elastic job's localhost and
  // 127.0.0.2).
  auto choice = ChoosePath(Members({{"a", "gpu0"}, {"b", "gpu0"}}), 0, {});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_FALSE(choice->nccl);
  EXPECT_THAT(choice->reason,
              HasSubstr("members 0 and 1 share GPU gpu0 (seen on hosts a and "
                        "b)"));
}

TEST(ChoosePath, GpusOfTheirOwnOnTwoHostsTakeNccl) {
  auto choice = ChoosePath(Members({{"a", "gpu0"}, {"b", "gpu1"}}), 0, {});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_TRUE(choice->nccl);
}

TEST(ChoosePath, ForcedNcclOnASharedGpuFailsNamingTheMembers) {
  PathOptions options;
  options.policy = PathPolicy::kNccl;
  auto choice = ChoosePath(Members({{"a", "gpu0"}, {"a", "gpu0"}}), 0, options);
  ASSERT_EQ(choice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(choice.status().message(),
              HasSubstr("HVD_GPU_DATA_PATH=nccl but members 0 and 1 share GPU "
                        "gpu0 on host a"));
}

TEST(ChoosePath, ForcedStagedWinsOverDistinctGpus) {
  PathOptions options;
  options.policy = PathPolicy::kStaged;
  auto choice = ChoosePath(Members({{"a", "gpu0"}, {"a", "gpu1"}}), 0, options);
  ASSERT_TRUE(choice.ok());
  EXPECT_FALSE(choice->nccl);
  EXPECT_EQ(choice->reason, "HVD_GPU_DATA_PATH=staged");
}

TEST(ChoosePath, WithoutNcclTheStagedPathIsTakenAndForcingNcclFails) {
  PathOptions options;
  options.nccl_available = false;
  auto choice = ChoosePath(Members({{"a", "gpu0"}}), 0, options);
  ASSERT_TRUE(choice.ok());
  EXPECT_FALSE(choice->nccl);
  options.policy = PathPolicy::kNccl;
  EXPECT_EQ(ChoosePath(Members({{"a", "gpu0"}}), 0, options).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ChoosePath, HierarchicalGroupsMembersByHostAndPosition) {
  PathOptions options;
  options.hierarchical = true;
  // Hosts interleaved: a holds members 0 and 2, b holds 1 and 3.
  const auto members =
      Members({{"a", "g0"}, {"b", "g2"}, {"a", "g1"}, {"b", "g3"}});
  auto first = ChoosePath(members, 0, options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->hierarchical);
  EXPECT_THAT(first->local, ElementsAre(0, 2));
  EXPECT_THAT(first->cross, ElementsAre(0, 1));
  EXPECT_EQ(first->host_index, 0);
  auto last = ChoosePath(members, 3, options);
  ASSERT_TRUE(last.ok());
  EXPECT_THAT(last->local, ElementsAre(1, 3));
  EXPECT_THAT(last->cross, ElementsAre(2, 3));
  EXPECT_EQ(last->host_index, 1);
}

TEST(ChoosePath, HierarchicalIsOffWhereItCannotApplyAndSaysWhy) {
  PathOptions options;
  options.hierarchical = true;
  struct Case {
    std::vector<MemberInfo> members;
    std::string why;
  } cases[] = {
      {Members({{"a", "g0"}, {"a", "g1"}}), "all members are on one host"},
      {Members({{"a", "g0"}, {"b", "g1"}}), "one member per host"},
      {Members({{"a", "g0"}, {"a", "g1"}, {"b", "g2"}}),
       "hosts hold different numbers of members (a: 2, b: 1)"},
  };
  for (const Case& c : cases) {
    auto choice = ChoosePath(c.members, 0, options);
    ASSERT_TRUE(choice.ok());
    EXPECT_TRUE(choice->nccl);
    EXPECT_FALSE(choice->hierarchical);
    EXPECT_THAT(choice->reason, HasSubstr(c.why));
  }
}

TEST(ChoosePath, RejectsAnIndexOutsideTheSet) {
  EXPECT_EQ(ChoosePath(Members({{"a", "g"}}), 1, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExchangeMemberInfo, EveryMemberGetsEveryInfoInOrder) {
  auto store = NewInMemoryStore();
  constexpr int kSize = 4;
  std::vector<absl::StatusOr<std::vector<MemberInfo>>> got(
      kSize, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kSize; ++i) {
    threads.emplace_back([&, i] {
      got[i] = ExchangeMemberInfo(
          store.get(), "gpu/set0/", i, kSize,
          {absl::StrCat("host", i / 2), absl::StrCat("GPU-", i)},
          absl::Seconds(20));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kSize; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status();
    ASSERT_EQ(got[i]->size(), kSize);
    for (int m = 0; m < kSize; ++m) {
      EXPECT_EQ((*got[i])[m].host, absl::StrCat("host", m / 2));
      EXPECT_EQ((*got[i])[m].gpu, absl::StrCat("GPU-", m));
    }
  }
}

TEST(ExchangeMemberInfo, ASetOfOneNeedsNoStore) {
  auto got =
      ExchangeMemberInfo(nullptr, "p/", 0, 1, {"h", "g"}, absl::Seconds(1));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].gpu, "g");
}

TEST(ExchangeMemberInfo, AMissingMemberTimesOutNamingIt) {
  auto store = NewInMemoryStore();
  std::thread other([&] {
    (void)ExchangeMemberInfo(store.get(), "p/", 1, 3, {"h", "g1"},
                             absl::Milliseconds(300));
  });
  auto got = ExchangeMemberInfo(store.get(), "p/", 0, 3, {"h", "g0"},
                                absl::Milliseconds(300));
  other.join();
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(),
              HasSubstr("GPU info of the set's 3 members: key 'p/info/2' "
                        "not set"));
}

TEST(ExchangeMemberInfo, RefusesAHostNameWithATab) {
  auto got =
      ExchangeMemberInfo(nullptr, "p/", 0, 1, {"h\tx", "g"}, absl::Seconds(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
}

// An NCCL unique id is 128 arbitrary bytes.
std::string BinaryId() {
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(255 - i);
  return id;
}

TEST(ShareFromRoot, TheRootsBytesReachEveryMemberUnchanged) {
  auto store = NewInMemoryStore();
  std::vector<absl::StatusOr<std::string>> got(3, absl::UnknownError("-"));
  std::vector<std::thread> threads;
  int made = 0;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      got[i] = ShareFromRoot(
          store.get(), "gpu/set0/nccl/all", i == 0,
          [&]() -> absl::StatusOr<std::string> {
            ++made;
            return BinaryId();
          },
          absl::Seconds(20));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made, 1);
  for (auto& id : got) {
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, BinaryId());
  }
}

TEST(ShareFromRoot, AMemberWithoutRootTimesOutNamingTheKey) {
  auto store = NewInMemoryStore();
  auto got = ShareFromRoot(store.get(), "gpu/set3/nccl/all", false, nullptr,
                           absl::Milliseconds(100));
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(), HasSubstr("gpu/set3/nccl/all"));
}

TEST(ShareFromRoot, TheRootsErrorIsReturned) {
  auto got = ShareFromRoot(
      nullptr, "k", true,
      []() -> absl::StatusOr<std::string> {
        return absl::InternalError("ncclGetUniqueId: unhandled system error");
      },
      absl::Seconds(1));
  EXPECT_THAT(got.status().message(), HasSubstr("ncclGetUniqueId"));
}

TEST(ShareFromRoot, AValueThatIsNotHexIsDataLoss) {
  auto store = NewInMemoryStore();
  ASSERT_TRUE(store->Set("k", "not hex!").ok());
  auto got = ShareFromRoot(store.get(), "k", false, nullptr, absl::Seconds(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
}

// Through the real rendezvous server (gRPC), as a job does it.
TEST(ShareFromRoot, ThroughTheRendezvousServer) {
  constexpr char kToken[] = "gpu-topology-test-token";
  RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  options.token = kToken;
  options.size = 2;
  RendezvousServer server(options);
  ASSERT_TRUE(server.Start().ok());
  const std::string address = absl::StrCat("127.0.0.1:", server.port());
  std::vector<absl::StatusOr<std::string>> got(2, absl::UnknownError("-"));
  std::vector<absl::StatusOr<std::vector<MemberInfo>>> infos(
      2, absl::UnknownError("-"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      auto store = GrpcStore::Connect(address, kToken, absl::Seconds(20));
      if (!store.ok()) {
        got[i] = store.status();
        return;
      }
      PrefixStore scoped(store->get(), "core/0/gpu/set0/");
      infos[i] = ExchangeMemberInfo(&scoped, "", i, 2,
                                    {"host", absl::StrCat("GPU-", i)},
                                    absl::Seconds(20));
      got[i] = ShareFromRoot(
          &scoped, "nccl/all", i == 0,
          []() -> absl::StatusOr<std::string> { return BinaryId(); },
          absl::Seconds(20));
    });
  }
  for (auto& t : threads) t.join();
  server.Shutdown();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(infos[i].ok()) << infos[i].status();
    EXPECT_EQ((*infos[i])[1].gpu, "GPU-1");
    ASSERT_TRUE(got[i].ok()) << got[i].status();
    EXPECT_EQ(*got[i], BinaryId());
  }
}

}  // namespace
}  // namespace hvd::gpu
