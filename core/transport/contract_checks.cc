#include "core/transport/contract_checks.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport::testing {

void ExpectOversizedRecvAnyFails(Context& sender, Context& receiver,
                                 absl::Time deadline) {
  const std::vector<char> big(kMaxRecvAnyBytes + 1);
  const int to = receiver.rank();
  std::thread send([&] {
    sender.Send(to, big.data(), big.size())->Wait(deadline).IgnoreError();
  });
  std::string got;
  const absl::Status status =
      receiver.RecvAny(sender.rank(), &got)->Wait(deadline);
  receiver.Abort(status);
  sender.Abort(absl::CancelledError("test over"));
  send.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr(absl::StrCat(
                  "claims ", kMaxRecvAnyBytes + 1, " bytes, more than the ",
                  kMaxRecvAnyBytes, " allowed")));
  EXPECT_LT(got.capacity(), size_t{1} << 20);
}

void ExpectAWaitPastItsDeadlineCanBeWaitedForAgain(Context& sender,
                                                   Context& receiver,
                                                   absl::Time deadline) {
  const std::string sent(64, 'w');
  std::string got(64, '\0');
  auto recv = receiver.Recv(sender.rank(), got.data(), got.size());
  const absl::Status early = recv->Wait(absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(early.code(), absl::StatusCode::kDeadlineExceeded) << early;
  EXPECT_TRUE(
      sender.Send(receiver.rank(), sent.data(), sent.size())->Wait(deadline).ok());
  EXPECT_TRUE(recv->Wait(deadline).ok());
  EXPECT_EQ(got, sent);
}

void ExpectRecvReduceHandsOverTheMessageOrSaysItCannot(Context& sender,
                                                       Context& receiver,
                                                       absl::Time deadline) {
  const int from = sender.rank();
  if (!receiver.ReducesOnReceive(from)) {
    const absl::Status status =
        receiver.RecvReduce(from, 8, [](size_t, const char*, size_t) {})
            ->Wait(deadline);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    EXPECT_TRUE(receiver.status().ok()) << receiver.status();
    return;
  }
  for (size_t len : {size_t{0}, size_t{1}, size_t{64}, size_t{4096} + 12,
                     (size_t{1} << 20) + 100, size_t{3} << 20}) {
    std::string sent(len, '\0');
    for (size_t i = 0; i < len; ++i) sent[i] = static_cast<char>(i * 7 + 3);
    std::thread send([&] {
      EXPECT_TRUE(sender.Send(receiver.rank(), sent.data(), len)
                      ->Wait(deadline)
                      .ok());
    });
    std::string got;
    bool misplaced = false;
    // Held by the reducer only: expired once the request let it go.
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    auto recv = receiver.RecvReduce(
        from, len,
        [&got, &misplaced, alive = std::move(alive)](
            size_t offset, const char* piece, size_t bytes) {
          if (offset != got.size() || offset % kReducePieceAlignment != 0) {
            misplaced = true;
          }
          got.append(piece, bytes);
        });
    EXPECT_TRUE(recv->Wait(deadline).ok()) << len;
    send.join();
    EXPECT_FALSE(misplaced) << len;
    EXPECT_TRUE(got == sent) << len;
    recv.reset();
    EXPECT_TRUE(watch.expired()) << len;
  }
}

}  // namespace hvd::transport::testing
