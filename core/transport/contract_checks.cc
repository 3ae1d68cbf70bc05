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

}  // namespace hvd::transport::testing
