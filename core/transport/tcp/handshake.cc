#include "core/transport/tcp/handshake.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/transport/tcp/wire.h"

namespace hvd::transport::tcp_internal {

std::string EncodeHello(int rank, int size, absl::string_view token) {
  std::string out(kHelloFixedBytes + token.size(), '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  StoreLE32(kHelloMagic, p);
  StoreLE32(kHelloVersion, p + 4);
  StoreLE32(static_cast<uint32_t>(rank), p + 8);
  StoreLE32(static_cast<uint32_t>(size), p + 12);
  StoreLE32(static_cast<uint32_t>(token.size()), p + 16);
  out.replace(kHelloFixedBytes, token.size(), token.data(), token.size());
  return out;
}

std::string HelloProof(absl::string_view secret, int from, int to, int size) {
  if (secret.empty()) return "";
  const std::string label =
      absl::StrCat("hvd tcp hello ", from, " to ", to, " of ", size);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(label.data()), label.size(), mac,
       &len);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), len));
}

absl::StatusOr<HelloHeader> DecodeHelloHeader(const unsigned char* bytes) {
  if (LoadLE32(bytes) != kHelloMagic) {
    return absl::InvalidArgumentError("not an hvd TCP hello (bad magic)");
  }
  if (const uint32_t version = LoadLE32(bytes + 4); version != kHelloVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello protocol version ", version, ", expected ", kHelloVersion));
  }
  HelloHeader header;
  header.rank = LoadLE32(bytes + 8);
  header.size = LoadLE32(bytes + 12);
  header.token_bytes = LoadLE32(bytes + 16);
  if (header.token_bytes > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello token of ", header.token_bytes, " bytes exceeds ",
                     kMaxTokenBytes));
  }
  return header;
}

bool TokensEqual(absl::string_view expected, absl::string_view got) {
  // Touch every byte of `expected` whatever `got` holds; only the length
  // (which the sender knows anyway) can leak through timing.
  unsigned char diff = expected.size() == got.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g =
        i < got.size() ? static_cast<unsigned char>(got[i]) : 0;
    diff |= static_cast<unsigned char>(expected[i]) ^ g;
  }
  return diff == 0;
}

}  // namespace hvd::transport::tcp_internal
