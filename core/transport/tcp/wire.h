// Byte layouts shared by the handshake and the data messages. Little-endian
// on the wire whatever the host order, so mixed clusters agree.
#ifndef HVD_CORE_TRANSPORT_TCP_WIRE_H_
#define HVD_CORE_TRANSPORT_TCP_WIRE_H_

#include <cstddef>
#include <cstdint>

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

inline void StoreLE32(uint32_t v, unsigned char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

inline uint32_t LoadLE32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}

inline void StoreLE64(uint64_t v, unsigned char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

inline uint64_t LoadLE64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_WIRE_H_
