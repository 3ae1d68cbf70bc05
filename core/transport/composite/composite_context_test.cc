#include "core/transport/composite/composite_context.h"

#include <string>
#include <thread>
#include <vector>

#include "core/rendezvous/store.h"
#include "core/transport/contract_checks.h"
#include "core/transport/shm/shm_context.h"
#include "core/transport/tcp/tcp_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

// Ranks 0 and 1 share a host (shared memory); rank 2 is elsewhere (TCP).
class CompositeContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    contexts_.resize(3);
    std::vector<absl::Status> statuses(3);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 3; ++rank) {
      threads.emplace_back([&, rank] {
        auto c = Make(rank);
        if (c.ok()) {
          contexts_[rank] = *std::move(c);
        } else {
          statuses[rank] = c.status();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  }

  absl::StatusOr<std::unique_ptr<Context>> Make(int rank) {
    TcpOptions options;
    options.iface = "127.0.0.1";
    options.token = "composite-test";
    auto tcp = CreateTcpContext(rank, 3, store_, options);
    if (!tcp.ok() || rank == 2) return tcp;
    auto shm = CreateShmContext(rank, 3, {0, 1}, store_.get(), {});
    if (!shm.ok()) return shm.status();
    std::vector<std::unique_ptr<Context>> children;
    children.push_back(*std::move(tcp));
    children.push_back(std::move(shm->context));
    return NewCompositeContext(std::move(children), {1, 1, 0});
  }

  std::shared_ptr<Store> store_ = NewInMemoryStore();
  std::vector<std::unique_ptr<Context>> contexts_;
};

TEST_F(CompositeContextTest, EveryPairExchangesOverItsOwnTransport) {
  EXPECT_THAT(contexts_[0]->PeerAddress(1), StartsWith("shm:pid"));
  EXPECT_EQ(contexts_[0]->PeerAddress(2), "not connected");  // TCP, lazy
  EXPECT_EQ(contexts_[0]->PeerAddress(0), "");
  std::vector<std::thread> threads;
  for (int me = 0; me < 3; ++me) {
    threads.emplace_back([&, me] {
      std::vector<std::string> in(3, std::string(3 << 20, '\0'));
      std::vector<std::string> out(3);
      std::vector<std::unique_ptr<Request>> requests;
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == me) continue;
        out[peer] = std::string(3 << 20, static_cast<char>('a' + me * 3 + peer));
        requests.push_back(contexts_[me]->Send(peer, out[peer].data(),
                                               out[peer].size()));
        requests.push_back(
            contexts_[me]->Recv(peer, in[peer].data(), in[peer].size()));
      }
      for (auto& r : requests) ASSERT_TRUE(r->Wait(Deadline()).ok());
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == me) continue;
        EXPECT_EQ(in[peer],
                  std::string(3 << 20, static_cast<char>('a' + peer * 3 + me)));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_THAT(contexts_[0]->PeerAddress(2), StartsWith("127.0.0.1:"));
}

TEST_F(CompositeContextTest, ReducesOnReceiveWhereThePeersTransportCan) {
  EXPECT_TRUE(contexts_[0]->ReducesOnReceive(1));   // shared memory
  EXPECT_FALSE(contexts_[0]->ReducesOnReceive(2));  // TCP
  EXPECT_FALSE(contexts_[0]->ReducesOnReceive(0));  // itself
  testing::ExpectRecvReduceHandsOverTheMessageOrSaysItCannot(
      *contexts_[1], *contexts_[0], Deadline());
  testing::ExpectRecvReduceHandsOverTheMessageOrSaysItCannot(
      *contexts_[2], *contexts_[0], Deadline());
}

TEST_F(CompositeContextTest, AbortFailsWaitersOnEveryChild) {
  std::string a(8, '\0'), b(8, '\0');
  auto from_shm = contexts_[0]->Recv(1, a.data(), a.size());
  auto from_tcp = contexts_[0]->Recv(2, b.data(), b.size());
  contexts_[0]->Abort(absl::AbortedError("job cancelled"));
  EXPECT_EQ(from_shm->Wait(Deadline()), absl::AbortedError("job cancelled"));
  EXPECT_EQ(from_tcp->Wait(Deadline()), absl::AbortedError("job cancelled"));
  EXPECT_EQ(contexts_[0]->status(), absl::AbortedError("job cancelled"));
}

TEST_F(CompositeContextTest, FailureSeenOnOneChildAbortsTheOther) {
  std::string a(8, '\0'), b(8, '\0');
  auto from_tcp = contexts_[0]->Recv(2, b.data(), b.size());
  auto from_shm = contexts_[0]->Recv(1, a.data(), a.size());
  // Rank 1 fails: its shared-memory peer learns it and passes it on.
  contexts_[1]->Abort(absl::UnavailableError("rank 1 lost its GPU"));
  absl::Status shm_status = from_shm->Wait(Deadline());
  EXPECT_EQ(shm_status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(shm_status.message(),
            "rank 0: rank 1 on this host failed: rank 1 lost its GPU");
  EXPECT_EQ(from_tcp->Wait(Deadline()), shm_status);
}

TEST(CompositeContextArguments, EveryPeerOnOneChildGivesThatChildAlone) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  std::vector<std::unique_ptr<Context>> children;
  children.push_back(*CreateTcpContext(0, 3, store, {}));
  children.push_back(*CreateTcpContext(0, 3, store, {}));
  const Context* second = children[1].get();
  auto c = NewCompositeContext(std::move(children), {0, 1, 1});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->get(), second);
}

TEST(CompositeContextArguments, RejectsBadRoutesAndMismatchedChildren) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  auto make = [&] {
    std::vector<std::unique_ptr<Context>> children;
    children.push_back(*CreateTcpContext(0, 1, store, {}));
    return children;
  };
  auto c = NewCompositeContext(make(), {0, 0});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "NewCompositeContext: 2 routes for a size-1 context");
  c = NewCompositeContext({}, {});
  EXPECT_EQ(c.status().message(), "NewCompositeContext: no children");
  c = NewCompositeContext(make(), {0});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::Status s = (*c)->Send(0, "x", 1)->Wait(Deadline());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "rank 0: Send to rank 0, which is not another rank of this size-1 "
            "context");
}

}  // namespace
}  // namespace hvd::transport
