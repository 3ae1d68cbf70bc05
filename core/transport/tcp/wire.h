// Byte layouts shared by the handshake and the data messages, little-endian
// (core/common/little_endian.h).
#ifndef HVD_CORE_TRANSPORT_TCP_WIRE_H_
#define HVD_CORE_TRANSPORT_TCP_WIRE_H_

#include <cstddef>
#include <cstdint>

#include "core/common/little_endian.h"

namespace hvd::transport::tcp_internal {

// Every data message is this header (the payload length) then the payload.
inline constexpr size_t kHeaderBytes = 8;

// A header claiming more than this is taken as stream corruption.
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 40;

// A header with this bit set is a stop notice, the last thing a failing
// context writes to each peer (between messages only): the other bits are
// the length of the reason (text, at most kMaxNoticeBytes) that follows.
inline constexpr uint64_t kStopNoticeFlag = uint64_t{1} << 63;
inline constexpr size_t kMaxNoticeBytes = 1024;

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_WIRE_H_
