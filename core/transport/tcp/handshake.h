// The first bytes on every connection. The dialer sends a Hello (who it is,
// and the job token proving it belongs to the job); the acceptor answers with
// one HelloReply byte; on kAccepted the dialer sends kHelloConfirm, and the
// connection carries data messages from then on. The confirmation lets the
// acceptor drop connections whose dialer gave up (timed out) before the
// reply arrived.
//
// A data connection is dialed by the higher rank of the pair. A Hello from a
// lower rank asks to be called back: the acceptor answers kCallBack, hangs
// up, and dials that rank (peer_connector.h).
//
//   Hello: magic u32 | version u32 | rank u32 | size u32 | token_len u32 |
//   token
#ifndef HVD_CORE_TRANSPORT_TCP_HANDSHAKE_H_
#define HVD_CORE_TRANSPORT_TCP_HANDSHAKE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hvd::transport::tcp_internal {

inline constexpr uint32_t kHelloMagic = 0x54445648;  // "HVDT"
inline constexpr uint32_t kHelloVersion = 2;
inline constexpr size_t kHelloFixedBytes = 20;
inline constexpr size_t kMaxTokenBytes = 4096;

inline constexpr unsigned char kHelloConfirm = 0xC5;

enum class HelloReply : uint8_t {
  kAccepted = 0,
  kBadToken = 1,
  kBadRank = 2,      // out of range, or not one this acceptor expects
  kBadProtocol = 3,  // magic, version or job size differ
  kCallBack = 4,     // to a lower rank: this rank dials it now
};

struct HelloHeader {
  uint32_t rank = 0;
  uint32_t size = 0;
  uint32_t token_bytes = 0;
};

// The whole Hello. The token must be at most kMaxTokenBytes.
std::string EncodeHello(int rank, int size, absl::string_view token);

// What a TCP dialer of rank `from` presents as its Hello's token to rank
// `to` of a job of `size`: hex HMAC-SHA256(secret, "hvd tcp hello <from> to
// <to> of <size>"), 64 characters; empty for an empty secret. Bound to the
// pair, so a Hello seen on the wire opens no other pair, and the secret
// itself never crosses the wire.
std::string HelloProof(absl::string_view secret, int from, int to, int size);

// Parses the kHelloFixedBytes at `bytes`. InvalidArgument when the magic or
// version is wrong or the token is longer than kMaxTokenBytes.
absl::StatusOr<HelloHeader> DecodeHelloHeader(const unsigned char* bytes);

// Equality in time that does not depend on where the contents differ, so a
// dialer cannot learn the token byte by byte.
bool TokensEqual(absl::string_view expected, absl::string_view got);

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_HANDSHAKE_H_
