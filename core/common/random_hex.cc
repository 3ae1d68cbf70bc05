#include "core/common/random_hex.h"

#include <openssl/rand.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"

namespace hvd {

absl::StatusOr<std::string> RandomHex(int bytes) {
  std::string raw(static_cast<size_t>(bytes), '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes) != 1) {
    return absl::InternalError("no random bytes from OpenSSL");
  }
  return absl::BytesToHexString(raw);
}

}  // namespace hvd
