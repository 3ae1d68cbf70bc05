#include "core/bootstrap/data_plane_token.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"

namespace hvd::bootstrap {

std::string DataPlaneToken(absl::string_view job_token) {
  if (job_token.empty()) return "";
  static constexpr char kLabel[] = "hvd data-plane hello 1";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), job_token.data(), static_cast<int>(job_token.size()),
       reinterpret_cast<const unsigned char*>(kLabel), sizeof(kLabel) - 1, mac,
       &len);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), len));
}

}  // namespace hvd::bootstrap
