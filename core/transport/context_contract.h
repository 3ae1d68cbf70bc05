// The transport interface's contract (transport.h) as one typed test suite
// that every transport's tests instantiate, so TCP, RDMA and any later
// transport are held to the same behaviour and the same messages:
//
//   struct TcpTraits {
//     static constexpr char kName[] = "TCP";  // as its messages say it
//     static absl::StatusOr<std::unique_ptr<Context>> Create(
//         int rank, int size, Store* store);
//   };
//   INSTANTIATE_TYPED_TEST_SUITE_P(Tcp, ContextContractTest, TcpTraits);
//
// Each test connects ranks one thread each over an in-memory store.
#ifndef HVD_CORE_TRANSPORT_CONTEXT_CONTRACT_H_
#define HVD_CORE_TRANSPORT_CONTEXT_CONTRACT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/rendezvous/store.h"
#include "core/transport/contract_checks.h"
#include "core/transport/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport::testing {

inline absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

// `len` bytes that differ with `seed`.
inline std::string Pattern(size_t len, int seed) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) {
    s[i] = static_cast<char>((i * 131 + seed) >> 3);
  }
  return s;
}

using ContextOrError = absl::StatusOr<std::unique_ptr<Context>>;

// create(rank) for ranks 0..size-1 at once, one thread each (a transport's
// set-up needs every rank at the same time).
inline std::vector<ContextOrError> TryConnectRanks(
    int size, const std::function<ContextOrError(int rank)>& create) {
  std::vector<ContextOrError> results(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] { results[rank] = create(rank); });
  }
  for (auto& t : threads) t.join();
  return results;
}

// TryConnectRanks, expecting every rank to succeed (null where one failed).
inline std::vector<std::unique_ptr<Context>> ConnectRanks(
    int size, const std::function<ContextOrError(int rank)>& create) {
  std::vector<std::unique_ptr<Context>> contexts;
  for (auto& r : TryConnectRanks(size, create)) {
    EXPECT_TRUE(r.ok()) << r.status();
    contexts.push_back(r.ok() ? *std::move(r) : nullptr);
  }
  return contexts;
}

// Runs fn(context) for every rank, one thread each.
inline void RunRanks(std::vector<std::unique_ptr<Context>>& contexts,
                     const std::function<void(Context&)>& fn) {
  std::vector<std::thread> threads;
  for (auto& c : contexts) {
    ASSERT_NE(c, nullptr);
    threads.emplace_back([&fn, &c] { fn(*c); });
  }
  for (auto& t : threads) t.join();
}

template <typename Traits>
class ContextContractTest : public ::testing::Test {
 protected:
  std::vector<std::unique_ptr<Context>> Connect(int size) {
    return ConnectRanks(size, [this, size](int rank) {
      return Traits::Create(rank, size, store_.get());
    });
  }

  std::unique_ptr<Store> store_ = NewInMemoryStore();
};

TYPED_TEST_SUITE_P(ContextContractTest);

TYPED_TEST_P(ContextContractTest, SizeOneContextNeedsNoStore) {
  auto context = TypeParam::Create(0, 1, nullptr);
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ((*context)->size(), 1);
}

TYPED_TEST_P(ContextContractTest, RecvAndRecvAnyInterleaveInOrder) {
  auto contexts = this->Connect(2);
  RunRanks(contexts, [](Context& c) {
    for (int i = 0; i < 100; ++i) {
      // Some messages are larger than a transport sends inline.
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

// Many requests outstanding at once (past any transport's credits).
TYPED_TEST_P(ContextContractTest, ManyMessagesArriveInSendOrder) {
  constexpr int kMessages = 2000;
  auto contexts = this->Connect(2);
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

TYPED_TEST_P(ContextContractTest, ZeroLengthMessages) {
  auto contexts = this->Connect(2);
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

TYPED_TEST_P(ContextContractTest, LengthMismatchFailsTheContextNamingBoth) {
  auto contexts = this->Connect(2);
  char data[200] = {};
  auto recv = contexts[1]->Recv(0, data, 200);
  // The sender may or may not learn of it (RDMA's does, TCP's has written).
  contexts[0]->Send(1, data, 100)->Wait(Deadline()).IgnoreError();
  const absl::Status status = recv->Wait(Deadline());
  // Read after: a transport that connects lazily knows it once connected.
  const std::string address = contexts[1]->PeerAddress(0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 1: message from rank 0 (", address,
                         ") is 100 bytes but the receive posted for it "
                         "expects 200 bytes"));
  EXPECT_EQ(contexts[1]->status(), status);
  EXPECT_EQ(contexts[1]->Send(0, data, 1)->Wait(Deadline()), status);
}

// A peer gone once the pair has exchanged a message (a transport that
// connects lazily says differently that a peer gone before it ever
// answered is unreachable).
TYPED_TEST_P(ContextContractTest, PeerDestroyedFailsPendingRecvNamingIt) {
  auto contexts = this->Connect(2);
  char data[16] = {};
  auto first = contexts[1]->Recv(0, data, 1);
  ASSERT_TRUE(contexts[0]->Send(1, data, 1)->Wait(Deadline()).ok());
  ASSERT_TRUE(first->Wait(Deadline()).ok());
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  std::thread destroyer([&] {
    absl::SleepFor(absl::Milliseconds(20));  // usually after Wait blocks
    contexts[0].reset();
  });
  const absl::Status status = recv->Wait(Deadline());
  destroyer.join();
  const std::string address = contexts[1]->PeerAddress(0);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), absl::StrCat("rank 1: connection to rank 0 (",
                                           address, ") closed by peer"));
}

TYPED_TEST_P(ContextContractTest, AbortWakesBlockedWaitWithTheReason) {
  auto contexts = this->Connect(2);
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

TYPED_TEST_P(ContextContractTest, AbortTellsPeersTheReason) {
  auto contexts = this->Connect(2);
  char data[16];
  auto recv = contexts[0]->Recv(1, data, sizeof(data));
  contexts[1]->Abort(absl::AbortedError("stall inspector gave up"));
  const absl::Status status = recv->Wait(Deadline());
  const std::string address = contexts[0]->PeerAddress(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 0: rank 1 (", address,
                         ") stopped: stall inspector gave up"));
}

TYPED_TEST_P(ContextContractTest, WaitPastDeadlineNamesPeerAndByteCount) {
  auto contexts = this->Connect(2);
  char data[64];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  const absl::Status status = recv->Wait(absl::Now() + absl::Milliseconds(30));
  const std::string address = contexts[1]->PeerAddress(0);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 1: Recv from rank 0 (", address,
                         ") not complete by the deadline: 0 of 64 bytes "
                         "transferred"));
  EXPECT_FALSE(recv->Done());
}

TYPED_TEST_P(ContextContractTest, DestroyingContextCancelsItsPendingRequests) {
  auto contexts = this->Connect(2);
  char data[8];
  auto recv = contexts[1]->Recv(0, data, sizeof(data));
  contexts[1].reset();
  const absl::Status status = recv->Wait(Deadline());
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 1: ", TypeParam::kName,
                         " transport context destroyed while a request to "
                         "or from rank 0 was pending"));
}

TYPED_TEST_P(ContextContractTest, SelfOrOutOfRangePeerIsInvalidArgument) {
  auto contexts = this->Connect(2);
  char data[4];
  EXPECT_EQ(contexts[0]->Send(0, data, 4)->Wait(Deadline()),
            absl::InvalidArgumentError(
                "rank 0: Send with peer 0, which is not another rank of this "
                "size-2 context"));
  EXPECT_EQ(contexts[0]->Recv(2, data, 4)->Wait(Deadline()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contexts[0]->status().ok());
}

TYPED_TEST_P(ContextContractTest, PollingDoneCompletesASmallReceive) {
  auto contexts = this->Connect(2);
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

TYPED_TEST_P(ContextContractTest, AnOversizedControlMessageFailsUnreserved) {
  auto contexts = this->Connect(2);
  ExpectOversizedRecvAnyFails(*contexts[0], *contexts[1], Deadline());
}

TYPED_TEST_P(ContextContractTest, AWaitPastItsDeadlineCanBeWaitedForAgain) {
  auto contexts = this->Connect(2);
  ExpectAWaitPastItsDeadlineCanBeWaitedForAgain(*contexts[0], *contexts[1],
                                                Deadline());
}

TYPED_TEST_P(ContextContractTest,
             RecvReduceHandsOverTheMessageOrSaysItCannot) {
  auto contexts = this->Connect(2);
  ExpectRecvReduceHandsOverTheMessageOrSaysItCannot(*contexts[0], *contexts[1],
                                                    Deadline());
}

REGISTER_TYPED_TEST_SUITE_P(
    ContextContractTest, SizeOneContextNeedsNoStore,
    RecvAndRecvAnyInterleaveInOrder, ManyMessagesArriveInSendOrder,
    ZeroLengthMessages, LengthMismatchFailsTheContextNamingBoth,
    PeerDestroyedFailsPendingRecvNamingIt, AbortWakesBlockedWaitWithTheReason,
    AbortTellsPeersTheReason, WaitPastDeadlineNamesPeerAndByteCount,
    DestroyingContextCancelsItsPendingRequests,
    SelfOrOutOfRangePeerIsInvalidArgument, PollingDoneCompletesASmallReceive,
    AnOversizedControlMessageFailsUnreserved,
    AWaitPastItsDeadlineCanBeWaitedForAgain,
    RecvReduceHandsOverTheMessageOrSaysItCannot);

}  // namespace hvd::transport::testing

#endif  // HVD_CORE_TRANSPORT_CONTEXT_CONTRACT_H_
