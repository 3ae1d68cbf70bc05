// Secrets made fresh: job tokens, ~/.hvd/secret, nonces.
#ifndef HVD_CORE_COMMON_RANDOM_HEX_H_
#define HVD_CORE_COMMON_RANDOM_HEX_H_

#include <string>

#include "absl/status/statusor.h"

namespace hvd {

// `bytes` bytes from OpenSSL's CSPRNG (seeded by the kernel), as 2 * bytes
// lowercase hex digits. Internal error when OpenSSL has no randomness to
// give; there is no fallback to a weak generator.
absl::StatusOr<std::string> RandomHex(int bytes);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_RANDOM_HEX_H_
