#include "core/common/streaming_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace hvd {

void StreamingCopy(void* dst, const void* src, size_t n) {
#if defined(__SSE2__)
  char* to = static_cast<char*>(dst);
  const char* from = static_cast<const char*>(src);
  // Streaming stores take 16-byte aligned addresses: the head up to the
  // first one, and the tail, are copied plainly.
  const size_t head = (16 - reinterpret_cast<uintptr_t>(to) % 16) % 16;
  if (n < head + 64) {
    std::memcpy(to, from, n);
    return;
  }
  std::memcpy(to, from, head);
  to += head;
  from += head;
  n -= head;
  for (; n >= 64; n -= 64, to += 64, from += 64) {
    const __m128i* in = reinterpret_cast<const __m128i*>(from);
    __m128i* out = reinterpret_cast<__m128i*>(to);
    const __m128i a = _mm_loadu_si128(in);
    const __m128i b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2);
    const __m128i d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  std::memcpy(to, from, n);
  // Streaming stores are weakly ordered, even against a later release
  // store: fence them before anyone is told the bytes are there.
  _mm_sfence();
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace hvd
