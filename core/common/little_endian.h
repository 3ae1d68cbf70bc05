// Fixed-width integers in little-endian byte order whatever the host's: the
// one encoding of hvd's wire and shared-memory formats, so that mixed
// clusters agree.
#ifndef HVD_CORE_COMMON_LITTLE_ENDIAN_H_
#define HVD_CORE_COMMON_LITTLE_ENDIAN_H_

#include <cstddef>
#include <cstdint>

namespace hvd {

// `v` as sizeof(T) bytes at `at`, least significant first.
template <typename T>
inline void StoreLE(T v, void* at) {
  auto* p = static_cast<unsigned char*>(at);
  for (size_t i = 0; i < sizeof(T); ++i) {
    p[i] = static_cast<unsigned char>(v >> (8 * i));
  }
}

// The T whose bytes StoreLE wrote at `at`.
template <typename T>
inline T LoadLE(const void* at) {
  const auto* p = static_cast<const unsigned char*>(at);
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= T{p[i]} << (8 * i);
  return v;
}

inline void StoreLE32(uint32_t v, void* at) { StoreLE(v, at); }
inline uint32_t LoadLE32(const void* at) { return LoadLE<uint32_t>(at); }
inline void StoreLE64(uint64_t v, void* at) { StoreLE(v, at); }
inline uint64_t LoadLE64(const void* at) { return LoadLE<uint64_t>(at); }

}  // namespace hvd

#endif  // HVD_CORE_COMMON_LITTLE_ENDIAN_H_
