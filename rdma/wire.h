// Control messages between the ranks of an RDMA context. Each travels as
// one fi_send into a receive buffer of kControlBytes the peer pre-posted:
//
//   header: type u8 | 0 u8 | seq u16 | from u32 | credits u32 | body_len u32
//
// `seq` names the receive (per sender-receiver pair, mod 2^16) the message
// is about; `credits` returns that many credits to the message's receiver.
// Host byte order: every rank of a job runs the same build on the same
// architecture.
#ifndef HVD_RDMA_WIRE_H_
#define HVD_RDMA_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace hvd::rdma {

inline constexpr size_t kControlBytes = 8192;
inline constexpr size_t kHeaderBytes = 16;

enum class MsgType : uint8_t {
  kHello = 1,       // body: the tcp transport's Hello (rank, size, token),
                    // then the sender's endpoint name
  kHelloReply = 2,  // body: one HelloReply byte
  kAdvert = 3,      // receiver -> sender: where to write message `seq`
  kAdvertAny = 4,   // receiver -> sender: a RecvAny awaits message `seq`
  kEager = 5,       // sender -> receiver: message `seq` inline (RecvAny)
  kLength = 6,      // sender -> receiver: message `seq` is body u64 bytes
  kMismatch = 7,    // sender -> receiver: body u64 length differs from advert
  kCredit = 8,      // credits only
  kAbort = 9,       // body: the reason this rank stopped
  kBye = 10,        // the sender's context is being destroyed
  kPing = 11,       // liveness probe: only its send completion matters
};

struct Header {
  MsgType type;
  uint16_t seq;
  uint32_t from;
  uint32_t credits;
  uint32_t body_len;
};

inline void EncodeHeader(const Header& h, char* out) {
  out[0] = static_cast<char>(h.type);
  out[1] = 0;
  std::memcpy(out + 2, &h.seq, 2);
  std::memcpy(out + 4, &h.from, 4);
  std::memcpy(out + 8, &h.credits, 4);
  std::memcpy(out + 12, &h.body_len, 4);
}

inline Header DecodeHeader(const char* in) {
  Header h;
  h.type = static_cast<MsgType>(in[0]);
  std::memcpy(&h.seq, in + 2, 2);
  std::memcpy(&h.from, in + 4, 4);
  std::memcpy(&h.credits, in + 8, 4);
  std::memcpy(&h.body_len, in + 12, 4);
  return h;
}

// One registered piece of an advertised buffer.
struct RemoteChunk {
  uint64_t addr;
  uint64_t key;
  uint64_t len;
};

// Advert body: total u64 | count u32 | count x (addr u64, key u64, len u64).
inline constexpr size_t kMaxChunks =
    (kControlBytes - kHeaderBytes - 12) / sizeof(RemoteChunk);

inline std::string EncodeAdvert(uint64_t total,
                                const std::vector<RemoteChunk>& chunks) {
  std::string out(12 + chunks.size() * sizeof(RemoteChunk), '\0');
  const uint32_t count = static_cast<uint32_t>(chunks.size());
  std::memcpy(out.data(), &total, 8);
  std::memcpy(out.data() + 8, &count, 4);
  if (!chunks.empty()) {
    std::memcpy(out.data() + 12, chunks.data(),
                chunks.size() * sizeof(RemoteChunk));
  }
  return out;
}

// False when the body is malformed.
inline bool DecodeAdvert(const char* body, size_t len, uint64_t* total,
                         std::vector<RemoteChunk>* chunks) {
  if (len < 12) return false;
  uint32_t count = 0;
  std::memcpy(total, body, 8);
  std::memcpy(&count, body + 8, 4);
  if (count > kMaxChunks || len != 12 + count * sizeof(RemoteChunk))
    return false;
  chunks->resize(count);
  if (count > 0)
    std::memcpy(chunks->data(), body + 12, count * sizeof(RemoteChunk));
  return true;
}

inline std::string EncodeU64(uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 8);
}
inline uint64_t DecodeU64(const char* body) {
  uint64_t v;
  std::memcpy(&v, body, 8);
  return v;
}

// Remote CQ data of the write that completes a message: sender rank and
// sequence, 32 bits (verbs' immediate data).
inline uint64_t ImmData(int from, uint16_t seq) {
  return (static_cast<uint64_t>(from) << 16) | seq;
}
inline int ImmFrom(uint64_t data) { return static_cast<int>(data >> 16); }
inline uint16_t ImmSeq(uint64_t data) {
  return static_cast<uint16_t>(data & 0xffff);
}

}  // namespace hvd::rdma

#endif  // HVD_RDMA_WIRE_H_
