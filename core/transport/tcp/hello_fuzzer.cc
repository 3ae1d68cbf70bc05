// Fuzzes what a TCP peer or the store hands a rank before any trust: the
// hello's fixed header (and the token compare after it), and the address
// record another rank published in the store ("tcp/<rank>"), with the dial
// order made from it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/transport/tcp/address.h"
#include "core/transport/tcp/handshake.h"

namespace tcp = hvd::transport::tcp_internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= tcp::kHelloFixedBytes) {
    auto header = tcp::DecodeHelloHeader(data);
    if (header.ok() && header->token_bytes > tcp::kMaxTokenBytes) {
      __builtin_trap();  // the decoder promised to refuse it
    }
    const std::string rest(reinterpret_cast<const char*>(data) +
                               tcp::kHelloFixedBytes,
                           size - tcp::kHelloFixedBytes);
    tcp::TokensEqual("0123456789abcdef", rest);
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto record = tcp::DecodePeerRecord(text);
  if (record.ok()) {
    tcp::DialCandidates(*record, "this-host");
    tcp::DialCandidates(*record, record->hostname);
  }
  return 0;
}
