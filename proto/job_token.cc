#include "proto/job_token.h"

#include "absl/strings/str_cat.h"

namespace hvd {
namespace rendezvous {

absl::Status ValidateJobToken(absl::string_view token) {
  constexpr size_t kMaxSize = 1024;
  if (token.empty()) return absl::InvalidArgumentError("job token is empty");
  if (token.size() > kMaxSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job token is ", token.size(), " bytes; at most ", kMaxSize, " allowed"));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job token has a byte at offset ", i,
          " that is not printable ASCII (metadata cannot carry it)"));
    }
  }
  return absl::OkStatus();
}

bool JobTokenMatches(absl::string_view presented, absl::string_view expected) {
  // Every byte of `expected` is visited whatever `presented` holds; the loop
  // has no data-dependent branch. Only the expected length can be learned
  // from timing, which is not a secret worth protecting.
  volatile unsigned char diff = presented.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char p =
        i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff = diff | (p ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

}  // namespace rendezvous
}  // namespace hvd
