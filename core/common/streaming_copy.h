// A copy whose destination is written past the caches.
//
// A plain copy into memory that is not in the cache reads every destination
// line before overwriting it (the write-allocate). Streaming stores skip
// that read: they suit a destination nobody reads again soon, such as the
// last bytes a large collective writes into its output. Measured on the
// development machine, 64 MiB received in 256 KiB chunks from one hot
// buffer: 9.5 ms plain, 5.0 ms streamed.
#ifndef HVD_CORE_COMMON_STREAMING_COPY_H_
#define HVD_CORE_COMMON_STREAMING_COPY_H_

#include <cstddef>

namespace hvd {

// Copies `n` bytes from `src` to `dst` (which do not overlap), the bulk of
// them with streaming stores where the CPU has them (x86-64; elsewhere a
// plain memcpy), and fences them: once it returns, the bytes are ordered
// before any later store of this thread, so publishing them with a release
// store (or a lock) works as after a memcpy.
void StreamingCopy(void* dst, const void* src, size_t n);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_STREAMING_COPY_H_
