// The RDMA transport over libfabric's tcp provider (the same RMA API verbs
// offers), one thread per rank over the in-memory store.
#include "rdma/rdma_context.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::rdma {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;
using transport::Context;
using transport::Request;

absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

RdmaOptions TestOptions() {
  RdmaOptions options;
  options.provider = "tcp";
  options.hostname = "testhost";
  options.token = "job-secret";
  options.connect_timeout = absl::Seconds(20);
  return options;
}

std::string Pattern(size_t len, int seed) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i)
    s[i] = static_cast<char>((i * 131 + seed) >> 3);
  return s;
}

class RdmaContextTest : public ::testing::Test {
 protected:
  std::vector<absl::StatusOr<std::unique_ptr<Context>>> TryConnect(
      int size, std::function<RdmaOptions(int)> options_for) {
    std::vector<absl::StatusOr<std::unique_ptr<Context>>> results(size);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < size; ++rank) {
      threads.emplace_back([&, rank] {
        results[rank] =
            CreateRdmaContext(rank, size, store_.get(), options_for(rank));
      });
    }
    for (auto& t : threads) t.join();
    return results;
  }

  std::vector<std::unique_ptr<Context>> Connect(
      int size, const RdmaOptions& options = TestOptions()) {
    auto results = TryConnect(size, [&](int) { return options; });
    std::vector<std::unique_ptr<Context>> contexts;
    for (auto& r : results) {
      EXPECT_TRUE(r.ok()) << r.status();
      contexts.push_back(r.ok() ? *std::move(r) : nullptr);
    }
    return contexts;
  }

  static void RunRanks(std::vector<std::unique_ptr<Context>>& contexts,
                       const std::function<void(Context&)>& fn) {
    std::vector<std::thread> threads;
    for (auto& c : contexts) {
      ASSERT_NE(c, nullptr);
      threads.emplace_back([&fn, &c] { fn(*c); });
    }
    for (auto& t : threads) t.join();
  }

  std::unique_ptr<Store> store_ = NewInMemoryStore();
};

TEST_F(RdmaContextTest, SizeOneContextNeedsNoStore) {
  auto context = CreateRdmaContext(0, 1, nullptr, TestOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ((*context)->size(), 1);
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
TEST_F(RdmaContextTest, ManyMessagesOutstandingArriveInSendOrder) {
  constexpr int kMessages = 2000;
  auto contexts = Connect(2);
  RunRanks(contexts, [](Context& c) {
    std::vector<std::string> data(kMessages);
    std::vector<std::unique_ptr<Request>> requests;
    for (int i = 0; i < kMessages; ++i) {
      const size_t len = (i % 7) * 300 + 1;
      if (c.rank() == 0) {
        data[i] = Pattern(len, i);
        requests.push_back(c.Send(1, data[i].data(), len));
      } else {
        data[i].resize(len);
        requests.push_back(c.Recv(0, data[i].data(), len));
      }
    }
    for (auto& r : requests) ASSERT_TRUE(r->Wait(Deadline()).ok());
    if (c.rank() == 1) {
      for (int i = 0; i < kMessages; ++i) {
        ASSERT_EQ(data[i], Pattern((i % 7) * 300 + 1, i)) << "message " << i;
      }
    }
  });
}

TEST_F(RdmaContextTest, RecvAndRecvAnyInterleaveInOrder) {
  auto contexts = Connect(2);
  RunRanks(contexts, [](Context& c) {
    for (int i = 0; i < 100; ++i) {
      // Every third RecvAny is beyond the eager limit: announced, sized,
      // advertised, written.
      const size_t len = i % 6 == 5 ? 100000 + i : i * 37;
      const std::string message = Pattern(len, i);
      if (c.rank() == 0) {
        ASSERT_TRUE(
            c.Send(1, message.data(), message.size())->Wait(Deadline()).ok());
      } else if (i % 2 == 0) {
        std::string got(message.size(), 'x');
        ASSERT_TRUE(c.Recv(0, got.data(), got.size())->Wait(Deadline()).ok());
        EXPECT_EQ(got, message);
      } else {
        std::string got = "stale";
        ASSERT_TRUE(c.RecvAny(0, &got)->Wait(Deadline()).ok());
        EXPECT_EQ(got, message);
      }
    }
  });
}

TEST_F(RdmaContextTest, ZeroLengthMessages) {
  auto contexts = Connect(2);
  RunRanks(contexts, [](Context& c) {
    if (c.rank() == 0) {
      ASSERT_TRUE(c.Send(1, nullptr, 0)->Wait(Deadline()).ok());
      ASSERT_TRUE(c.Send(1, nullptr, 0)->Wait(Deadline()).ok());
      ASSERT_TRUE(c.Send(1, "after", 5)->Wait(Deadline()).ok());
    } else {
      ASSERT_TRUE(c.Recv(0, nullptr, 0)->Wait(Deadline()).ok());
      std::string any = "not empty";
      ASSERT_TRUE(c.RecvAny(0, &any)->Wait(Deadline()).ok());
      EXPECT_EQ(any, "");
      ASSERT_TRUE(c.RecvAny(0, &any)->Wait(Deadline()).ok());
      EXPECT_EQ(any, "after");
    }
  });
}

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

TEST_F(RdmaContextTest, LengthMismatchFailsTheContextNamingBothLengths) {
  auto contexts = Connect(2);
  const std::string address = contexts[1]->PeerAddress(0);
  char data[200] = {};
  auto recv = contexts[1]->Recv(0, data, 200);
  const absl::Status sent = contexts[0]->Send(1, data, 100)->Wait(Deadline());
  EXPECT_EQ(sent.code(), absl::StatusCode::kInternal);
  const absl::Status status = recv->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 1: message from rank 0 (", address,
                         ") is 100 bytes but the receive posted for it "
                         "expects 200 bytes"));
  EXPECT_EQ(contexts[1]->status(), status);
  EXPECT_EQ(contexts[1]->Send(0, data, 1)->Wait(Deadline()), status);
}

TEST_F(RdmaContextTest, PeerDestroyedFailsPendingRecvNamingThePeer) {
  auto contexts = Connect(2);
  const std::string address = contexts[1]->PeerAddress(0);
  char data[16];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  std::thread destroyer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    contexts[0].reset();
  });
  const absl::Status status = recv->Wait(Deadline());
  destroyer.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), absl::StrCat("rank 1: connection to rank 0 (",
                                           address, ") closed by peer"));
}

// Rank 1 goes with sends of 64 MiB under way; rank 0 waits for more
// messages than rank 1 posted, so some receive must fail.
TEST_F(RdmaContextTest, PeerDestroyedMidTransferFailsTheOtherSide) {
  auto contexts = Connect(2);
  const std::string address = contexts[0]->PeerAddress(1);
  constexpr size_t kLen = size_t{64} << 20;
  std::string out = Pattern(kLen, 1), in(kLen, '\0');
  std::vector<std::unique_ptr<Request>> recvs;
  for (int i = 0; i < 5; ++i) recvs.push_back(contexts[0]->Recv(1, in.data(), kLen));
  std::vector<std::unique_ptr<Request>> sends;
  for (int i = 0; i < 4; ++i) sends.push_back(contexts[1]->Send(0, out.data(), kLen));
  contexts[1].reset();
  for (auto& s : sends) EXPECT_TRUE(s->Done());
  int failed = 0;
  for (auto& r : recvs) {
    const absl::Status s = r->Wait(Deadline());
    if (s.ok()) continue;
    ++failed;
    EXPECT_EQ(s, absl::UnavailableError(
                     absl::StrCat("rank 0: connection to rank 1 (", address,
                                  ") closed by peer")));
  }
  EXPECT_GE(failed, 1);
}

TEST_F(RdmaContextTest, AbortWakesBlockedWaitWithTheReason) {
  auto contexts = Connect(2);
  char data[16];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  absl::Status waited;
  std::thread waiter([&] { waited = recv->Wait(Deadline()); });
  absl::SleepFor(absl::Milliseconds(20));
  contexts[1]->Abort(absl::AbortedError("stall inspector gave up"));
  waiter.join();
  EXPECT_EQ(waited, absl::AbortedError("stall inspector gave up"));
  EXPECT_EQ(contexts[1]->status(), waited);
  contexts[1]->Abort(absl::InternalError("second reason is ignored"));
  EXPECT_EQ(contexts[1]->Recv(0, data, 1)->Wait(Deadline()), waited);
}

TEST_F(RdmaContextTest, AbortTellsPeersTheReason) {
  auto contexts = Connect(3);
  const std::string address = contexts[0]->PeerAddress(1);
  char data[16];
  auto recv = contexts[0]->Recv(2, data, sizeof(data));
  contexts[1]->Abort(absl::AbortedError("stall inspector gave up"));
  const absl::Status status = recv->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 0: rank 1 (", address,
                         ") stopped: stall inspector gave up"));
}

TEST_F(RdmaContextTest, WaitPastDeadlineNamesPeerAndByteCount) {
  auto contexts = Connect(2);
  const std::string address = contexts[1]->PeerAddress(0);
  char data[64];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  const absl::Status status = recv->Wait(absl::Now() + absl::Milliseconds(30));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 1: Recv from rank 0 (", address,
                         ") not complete by the deadline: 0 of 64 bytes "
                         "transferred"));
  EXPECT_FALSE(recv->Done());
}

TEST_F(RdmaContextTest, DestroyingContextCancelsItsPendingRequests) {
  auto contexts = Connect(2);
  char data[8];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  contexts[1].reset();
  const absl::Status status = recv->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(),
            "rank 1: RDMA transport context destroyed while a request to or "
            "from rank 0 was pending");
}

TEST_F(RdmaContextTest, PollingDoneCompletesASmallReceive) {
  auto contexts = Connect(2);
  char data[3];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  ASSERT_TRUE(contexts[0]->Send(1, "abc", 3)->Wait(Deadline()).ok());
  for (int i = 0; i < 5000 && !recv->Done(); ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_TRUE(recv->Done());
  EXPECT_TRUE(recv->Wait(absl::InfinitePast()).ok());
  EXPECT_EQ(std::string(data, 3), "abc");
}

TEST_F(RdmaContextTest, SelfOrOutOfRangePeerIsInvalidArgument) {
  auto contexts = Connect(2);
  char data[4];
  EXPECT_EQ(contexts[0]->Send(0, data, 4)->Wait(Deadline()),
            absl::InvalidArgumentError(
                "rank 0: Send with peer 0, which is not another rank of this "
                "size-2 context"));
  EXPECT_EQ(contexts[0]->Recv(2, data, 4)->Wait(Deadline()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contexts[0]->status().ok());
}

// Both ranks learn it: each refuses the other's token.
TEST_F(RdmaContextTest, WrongTokenIsRefusedWithUnauthenticated) {
  auto results = TryConnect(2, [](int rank) {
    RdmaOptions options = TestOptions();
    options.token = rank == 0 ? "right token" : "wrong token";
    return options;
  });
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(results[1].status().message()),
              MatchesRegex("rank 1: peer rank 0 at .+ refused the job token"));
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(results[0].status().message()),
              MatchesRegex("rank 0: peer rank 1 at .+ refused the job token"));
}

// Rank 0's endpoint existed long enough to publish its address, then went.
TEST_F(RdmaContextTest, EndpointThatNeverAnswersTimesOutNamingTheRank) {
  RdmaOptions options = TestOptions();
  options.connect_timeout = absl::Milliseconds(200);
  {
    auto gone = CreateRdmaContext(0, 2, store_.get(), options);
    ASSERT_EQ(gone.status().code(), absl::StatusCode::kDeadlineExceeded);
  }
  options.connect_timeout = absl::Milliseconds(500);
  auto context = CreateRdmaContext(1, 2, store_.get(), options);
  EXPECT_EQ(context.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(context.status().message()),
              StartsWith("rank 1: RDMA mesh not connected within 500ms: rank "
                         "0 at "));
}

TEST_F(RdmaContextTest, MissingPeerAddressTimesOutNamingTheKey) {
  RdmaOptions options = TestOptions();
  options.connect_timeout = absl::Milliseconds(100);
  auto context = CreateRdmaContext(1, 2, store_.get(), options);
  EXPECT_EQ(context.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(
      std::string(context.status().message()),
      StartsWith("rank 1: reading rank 0's RDMA address from the store: "));
}

TEST_F(RdmaContextTest, UnknownProviderFailsNamingWhatWasLookedFor) {
  RdmaOptions options = TestOptions();
  options.provider = "nosuch";
  auto context = CreateRdmaContext(0, 2, store_.get(), options);
  EXPECT_EQ(context.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(context.status().message()),
              StartsWith("rank 0: no libfabric provider named 'nosuch' offers "
                         "RMA writes with remote CQ data on a reliable "
                         "(FI_EP_RDM) endpoint (usable here: tcp"));
}

// free() then malloc() of the same size usually returns the same address
// (mmap'ed chunks); the second message must not reuse the first buffer's
// registration.
TEST_F(RdmaContextTest, BufferFreedAndReallocatedAtTheSameAddressIsReregistered) {
  auto contexts = Connect(2);
  constexpr size_t kLen = size_t{4} << 20;
  void* first_address = nullptr;
  for (int round = 0; round < 3; ++round) {
    char* buf = static_cast<char*>(std::malloc(kLen));
    if (round == 0) first_address = buf;
    const std::string out = Pattern(kLen, round);
    std::string in(kLen, '\0');
    auto recv = contexts[1]->Recv(0, buf, kLen);
    std::memcpy(in.data(), out.data(), kLen);
    ASSERT_TRUE(contexts[0]->Send(1, in.data(), kLen)->Wait(Deadline()).ok());
    ASSERT_TRUE(recv->Wait(Deadline()).ok());
    EXPECT_EQ(std::memcmp(buf, out.data(), kLen), 0) << "round " << round;
    if (round > 0 && buf != first_address) {
      ADD_FAILURE() << "malloc did not reuse the address; the test proves "
                       "nothing";
    }
    std::free(buf);
  }
  const RegistrationStats stats = RdmaRegistrationStats(*contexts[1]);
  EXPECT_EQ(stats.registrations, 3u);
  EXPECT_EQ(stats.hits, 0u);
  EXPECT_EQ(stats.live, 0u);
}

}  // namespace
}  // namespace hvd::rdma
