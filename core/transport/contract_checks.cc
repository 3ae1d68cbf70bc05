#include "core/transport/contract_checks.h"

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

}  // namespace hvd::transport::testing
