// The RDMA transport over libfabric's tcp provider (the same RMA API verbs
// offers), one thread per rank over the in-memory store.
#include "rdma/rdma_context.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/transport/context_contract.h"
#include "rdma/fabric.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::rdma {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;
using transport::testing::Deadline;
using transport::testing::Pattern;
using transport::testing::RunRanks;
using transport::Context;
using transport::Request;

RdmaOptions TestOptions() {
  RdmaOptions options;
  options.provider = "tcp";
  options.hostname = "testhost";
  options.token = "job-secret";
  options.connect_timeout = absl::Seconds(20);
  return options;
}

class RdmaContextTest : public ::testing::Test {
 protected:
  // One thread per rank; each rank gets its own options from `options_for`.
  std::vector<transport::testing::ContextOrError> TryConnect(
      int size, std::function<RdmaOptions(int)> options_for) {
    return transport::testing::TryConnectRanks(size, [&](int rank) {
      return CreateRdmaContext(rank, size, store_, options_for(rank));
    });
  }

  std::vector<std::unique_ptr<Context>> Connect(
      int size, const RdmaOptions& options = TestOptions()) {
    return transport::testing::ConnectRanks(size, [&](int rank) {
      return CreateRdmaContext(rank, size, store_, options);
    });
  }

  std::shared_ptr<Store> store_ = NewInMemoryStore();
};

// The interface's contract (core/transport/context_contract.h) over Rdma.
struct RdmaTraits {
  static constexpr char kName[] = "RDMA";
  static transport::testing::ContextOrError Create(int rank, int size, Store* store) {
    // The suite's store outlives its contexts.
    return CreateRdmaContext(rank, size,
                             std::shared_ptr<Store>(store, [](Store*) {}),
                             TestOptions());
  }
};
}  // namespace
}  // namespace hvd::rdma

// In the suite's namespace, as gtest requires.
namespace hvd::transport::testing {
INSTANTIATE_TYPED_TEST_SUITE_P(Rdma, ContextContractTest,
                               ::hvd::rdma::RdmaTraits);
}  // namespace hvd::transport::testing

namespace hvd::rdma {
namespace {

// RDMA fails the whole context on the first failure: an abort reaches rank
// 0 even while it waits on another rank.
TEST_F(RdmaContextTest, AbortReachesAWaitOnAnotherPeer) {
  auto contexts = Connect(3);
  char data[16];
  // Ranks reach each other at their first message.
  auto hello = contexts[1]->Recv(0, data, 1);
  ASSERT_TRUE(contexts[0]->Send(1, data, 1)->Wait(Deadline()).ok());
  ASSERT_TRUE(hello->Wait(Deadline()).ok());
  const std::string address = contexts[0]->PeerAddress(1);
  auto recv = contexts[0]->Recv(2, data, sizeof(data));
  contexts[1]->Abort(absl::AbortedError("stall inspector gave up"));
  const absl::Status status = recv->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 0: rank 1 (", address,
                         ") stopped: stall inspector gave up"));
}

TEST_F(RdmaContextTest, OneMessageEachWay) {
  auto contexts = Connect(2);
  RunRanks(contexts, [](Context& c) {
    const int peer = 1 - c.rank();
    const std::string out = Pattern(1000, c.rank());
    std::string in(1000, '\0');
    auto recv = c.Recv(peer, in.data(), in.size());
    ASSERT_EQ(c.Send(peer, out.data(), out.size())->Wait(Deadline()),
              absl::OkStatus());
    ASSERT_EQ(recv->Wait(Deadline()), absl::OkStatus());
    EXPECT_EQ(in, Pattern(1000, peer));
  });
}

// More messages outstanding than a sender has credits.
// 5 MiB through registrations of at most 1 MiB (and a RecvAny of it).
TEST_F(RdmaContextTest, MessagesLargerThanTheLargestRegistration) {
  RdmaOptions options = TestOptions();
  options.tuning.max_registration_bytes = 1 << 20;
  auto contexts = Connect(2, options);
  constexpr size_t kLen = (size_t{5} << 20) + 3;
  RunRanks(contexts, [](Context& c) {
    const int peer = 1 - c.rank();
    const std::string out = Pattern(kLen, c.rank());
    std::string in(kLen, '\0'), any;
    auto recv = c.Recv(peer, in.data(), in.size());
    auto recv_any = c.RecvAny(peer, &any);
    auto send = c.Send(peer, out.data(), out.size());
    auto send_again = c.Send(peer, out.data(), out.size());
    ASSERT_TRUE(recv->Wait(Deadline()).ok());
    ASSERT_TRUE(recv_any->Wait(Deadline()).ok());
    ASSERT_TRUE(send->Wait(Deadline()).ok());
    ASSERT_TRUE(send_again->Wait(Deadline()).ok());
    EXPECT_TRUE(in == Pattern(kLen, peer));
    EXPECT_TRUE(any == Pattern(kLen, peer));
  });
}

// Both ranks send each other several messages at once, each written in
// many pieces through a window smaller than one message (and, in one
// configuration, smaller than a piece): every byte arrives where it belongs.
TEST_F(RdmaContextTest, MessagesWrittenInPiecesThroughASmallWindowArriveWhole) {
  for (const size_t window : {size_t{48} << 10, size_t{1000}}) {
    RdmaOptions options = TestOptions();
    options.tuning.write_window_bytes = window;
    options.tuning.write_piece_bytes = 16 << 10;
    store_ = NewInMemoryStore();
    auto contexts = Connect(2, options);
    constexpr size_t kLen = (size_t{300} << 10) + 5;
    constexpr int kMessages = 6;
    RunRanks(contexts, [](Context& c) {
      const int peer = 1 - c.rank();
      std::vector<std::string> in(kMessages, std::string(kLen, '\0'));
      std::vector<std::string> out;
      std::vector<std::unique_ptr<transport::Request>> recvs, sends;
      for (int m = 0; m < kMessages; ++m) {
        out.push_back(Pattern(kLen, 10 * c.rank() + m));
        recvs.push_back(c.Recv(peer, in[m].data(), kLen));
      }
      for (int m = 0; m < kMessages; ++m) {
        sends.push_back(c.Send(peer, out[m].data(), kLen));
      }
      for (auto& r : recvs) ASSERT_EQ(r->Wait(Deadline()), absl::OkStatus());
      for (auto& s : sends) ASSERT_EQ(s->Wait(Deadline()), absl::OkStatus());
      for (int m = 0; m < kMessages; ++m) {
        EXPECT_TRUE(in[m] == Pattern(kLen, 10 * peer + m)) << m;
      }
    });
  }
}

TEST_F(RdmaContextTest, EveryRankSendsToEveryOtherInMeshesOfOneToEight) {
  for (int size : {1, 2, 3, 5, 8}) {
    store_ = NewInMemoryStore();
    auto contexts = Connect(size);
    RunRanks(contexts, [size](Context& c) {
      std::vector<std::string> out(size), in(size);
      std::vector<std::unique_ptr<Request>> requests;
      for (int peer = 0; peer < size; ++peer) {
        if (peer == c.rank()) continue;
        out[peer] = absl::StrCat("from ", c.rank(), " to ", peer);
        requests.push_back(c.RecvAny(peer, &in[peer]));
        requests.push_back(c.Send(peer, out[peer].data(), out[peer].size()));
      }
      for (auto& r : requests) ASSERT_TRUE(r->Wait(Deadline()).ok());
      for (int peer = 0; peer < size; ++peer) {
        if (peer == c.rank()) continue;
        EXPECT_EQ(in[peer], absl::StrCat("from ", peer, " to ", c.rank()));
      }
    });
  }
}

// Rank 1 goes with sends of 64 MiB under way; rank 0 waits for more
// messages than rank 1 posted, so some receive must fail.
TEST_F(RdmaContextTest, PeerDestroyedMidTransferFailsTheOtherSide) {
  RdmaOptions options = TestOptions();
  options.probe_timeout = absl::Seconds(2);
  auto contexts = Connect(2, options);
  // Connected first (a peer gone before it ever answered is found by the
  // connect timeout instead).
  char byte = 0;
  auto hello = contexts[0]->Recv(1, &byte, 1);
  ASSERT_TRUE(contexts[1]->Send(0, &byte, 1)->Wait(Deadline()).ok());
  ASSERT_TRUE(hello->Wait(Deadline()).ok());
  const std::string address = contexts[0]->PeerAddress(1);
  constexpr size_t kLen = size_t{64} << 20;
  std::string out = Pattern(kLen, 1), in(kLen, '\0');
  std::vector<std::unique_ptr<Request>> recvs;
  for (int i = 0; i < 5; ++i) recvs.push_back(contexts[0]->Recv(1, in.data(), kLen));
  std::vector<std::unique_ptr<Request>> sends;
  for (int i = 0; i < 4; ++i) sends.push_back(contexts[1]->Send(0, out.data(), kLen));
  contexts[1].reset();
  for (auto& s : sends) EXPECT_TRUE(s->Done());
  // Rank 1's goodbye may be stuck behind its writes when its endpoint
  // closes; then rank 0's probe finds it gone.
  const std::string lost =
      absl::StrCat("rank 0: connection to rank 1 (", address, ") ");
  int failed = 0;
  for (auto& r : recvs) {
    const absl::Status s = r->Wait(Deadline());
    if (s.ok()) continue;
    ++failed;
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    // Closed, or lost: a probe not delivered within 2s, or refused by the
    // socket under the provider (ENOTCONN).
    EXPECT_TRUE(s.message() == lost + "closed by peer" ||
                absl::StartsWith(s.message(), lost + "lost: "))
        << s;
  }
  EXPECT_GE(failed, 1);
}

// Both ranks learn it, at their first message: each refuses the other's
// token.
TEST_F(RdmaContextTest, WrongTokenIsRefusedWithUnauthenticated) {
  auto results = TryConnect(2, [](int rank) {
    RdmaOptions options = TestOptions();
    options.token = rank == 0 ? "right token" : "wrong token";
    return options;
  });
  ASSERT_TRUE(results[0].ok() && results[1].ok());
  char data[4] = {};
  auto recv = (*results[0])->Recv(1, data, sizeof(data));
  const absl::Status sent = (*results[1])->Send(0, data, 4)->Wait(Deadline());
  const absl::Status received = recv->Wait(Deadline());
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(sent.message()),
              MatchesRegex("rank 1: peer rank 0 at .+ refused the job token"));
  EXPECT_EQ(received.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(received.message()),
              MatchesRegex("rank 0: peer rank 1 at .+ refused the job token"));
}

// Rank 0's endpoint existed long enough to publish its record, then went.
TEST_F(RdmaContextTest, EndpointThatNeverAnswersTimesOutNamingTheRank) {
  {
    auto gone = Fabric::Open("tcp", 64);
    ASSERT_TRUE(gone.ok()) << gone.status();
    ASSERT_TRUE(store_
                    ->Set("rdma/0",
                          absl::StrCat(
                              "hvd-rdma-1\n", (*gone)->provider_name(), "\n",
                              absl::BytesToHexString((*gone)->endpoint_name())))
                    .ok());
  }
  RdmaOptions options = TestOptions();
  options.connect_timeout = absl::Milliseconds(500);
  auto context = CreateRdmaContext(1, 2, store_, options);
  ASSERT_TRUE(context.ok()) << context.status();
  char data[4] = {};
  const absl::Status status = (*context)->Send(0, data, 4)->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("rank 1: no RDMA connection to rank 0 ("));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(") within 500ms: it sent no hello with the job token"));
}

TEST_F(RdmaContextTest, APeerThatNeverPublishesTimesOutNamingIt) {
  RdmaOptions options = TestOptions();
  options.connect_timeout = absl::Milliseconds(100);
  auto context = CreateRdmaContext(1, 2, store_, options);
  ASSERT_TRUE(context.ok()) << context.status();
  char data[4] = {};
  const absl::Status status = (*context)->Recv(0, data, 4)->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            "rank 1: rank 0 published no address to connect to within 100ms "
            "(has its process started?)");
}

TEST_F(RdmaContextTest, ARecordOfAnotherProviderIsRefusedSayingSo) {
  ASSERT_TRUE(store_->Set("rdma/0", "hvd-rdma-1\nverbs;ofi_rxm\n00").ok());
  auto context = CreateRdmaContext(1, 2, store_, TestOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  char data[4] = {};
  const absl::Status status = (*context)->Recv(0, data, 4)->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              MatchesRegex("rank 1: looking up rank 0's address: rank 0 uses "
                           "libfabric provider 'verbs;ofi_rxm', this rank "
                           "'tcp;.+'"));
}

// Of a mesh of four, ranks 0 and 1 exchange messages and the others none:
// only they look each other up, and ranks 2 and 3 never hear of them.
TEST_F(RdmaContextTest, ARankReachesOnlyThePeersItExchangesMessagesWith) {
  auto contexts = Connect(4);
  char in[8] = {}, out[8] = "0 to 1";
  auto recv = contexts[1]->Recv(0, in, sizeof(in));
  ASSERT_TRUE(contexts[0]->Send(1, out, sizeof(out))->Wait(Deadline()).ok());
  ASSERT_TRUE(recv->Wait(Deadline()).ok());
  EXPECT_STREQ(in, "0 to 1");
  EXPECT_NE(contexts[0]->PeerAddress(1), "not connected");
  EXPECT_NE(contexts[1]->PeerAddress(0), "not connected");
  for (int peer : {2, 3}) {
    EXPECT_EQ(contexts[0]->PeerAddress(peer), "not connected");
    EXPECT_EQ(contexts[1]->PeerAddress(peer), "not connected");
  }
  for (int rank : {2, 3}) {
    for (int peer = 0; peer < 4; ++peer) {
      if (peer != rank) {
        EXPECT_EQ(contexts[rank]->PeerAddress(peer), "not connected");
      }
    }
  }
  // Control buffers: a fixed part, and one peer's part more on 0 and 1.
  const size_t idle = RdmaControlBufferBytes(*contexts[2]);
  EXPECT_GT(idle, 0u);
  EXPECT_EQ(RdmaControlBufferBytes(*contexts[3]), idle);
  EXPECT_EQ(RdmaControlBufferBytes(*contexts[0]),
            RdmaControlBufferBytes(*contexts[1]));
  EXPECT_GT(RdmaControlBufferBytes(*contexts[0]), idle);
}

TEST_F(RdmaContextTest, UnknownProviderFailsNamingWhatWasLookedFor) {
  RdmaOptions options = TestOptions();
  options.provider = "nosuch";
  auto context = CreateRdmaContext(0, 2, store_, options);
  EXPECT_EQ(context.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(context.status().message()),
              StartsWith("rank 0: no libfabric provider named 'nosuch' offers "
                         "RMA writes with remote CQ data on a reliable "
                         "(FI_EP_RDM) endpoint (usable here: tcp"));
}

// Memory unmapped and mapped again at the same address (what free() and
// malloc() of a large buffer usually do; made certain here with MAP_FIXED,
// since a sanitizer's allocator would not reuse the address): the second
// message must not reuse the first mapping's registration.
TEST_F(RdmaContextTest, BufferFreedAndReallocatedAtTheSameAddressIsReregistered) {
  auto contexts = Connect(2);
  constexpr size_t kLen = size_t{4} << 20;
  void* const address = mmap(nullptr, kLen, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(address, MAP_FAILED);
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      ASSERT_EQ(munmap(address, kLen), 0);
      ASSERT_EQ(mmap(address, kLen, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
                address);
    }
    char* buf = static_cast<char*>(address);
    const std::string out = Pattern(kLen, round);
    std::string in(kLen, '\0');
    auto recv = contexts[1]->Recv(0, buf, kLen);
    std::memcpy(in.data(), out.data(), kLen);
    ASSERT_TRUE(contexts[0]->Send(1, in.data(), kLen)->Wait(Deadline()).ok());
    ASSERT_TRUE(recv->Wait(Deadline()).ok());
    EXPECT_EQ(std::memcmp(buf, out.data(), kLen), 0) << "round " << round;
  }
  munmap(address, kLen);
  const RegistrationStats stats = RdmaRegistrationStats(*contexts[1]);
  EXPECT_EQ(stats.registrations, 3u);
  EXPECT_EQ(stats.hits, 0u);
  EXPECT_EQ(stats.live, 0u);
}

}  // namespace
}  // namespace hvd::rdma
