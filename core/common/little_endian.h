// Fixed-width integers in little-endian byte order whatever the host's: the
// one encoding of hvd's wire and shared-memory formats, so that mixed
// clusters agree.
#ifndef HVD_CORE_COMMON_LITTLE_ENDIAN_H_
#define HVD_CORE_COMMON_LITTLE_ENDIAN_H_

#include <cstdint>

namespace hvd {

inline void StoreLE32(uint32_t v, void* at) {
  auto* p = static_cast<unsigned char*>(at);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

inline uint32_t LoadLE32(const void* at) {
  const auto* p = static_cast<const unsigned char*>(at);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}

inline void StoreLE64(uint64_t v, void* at) {
  auto* p = static_cast<unsigned char*>(at);
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

inline uint64_t LoadLE64(const void* at) {
  const auto* p = static_cast<const unsigned char*>(at);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace hvd

#endif  // HVD_CORE_COMMON_LITTLE_ENDIAN_H_
