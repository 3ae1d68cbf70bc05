#include "core/transport/tcp/socket_options.h"

#include "core/common/env.h"
#include "core/common/logging.h"

namespace hvd::transport::tcp_internal {
namespace {

// 4 MiB (the kernel doubles it, up to net.core.[rw]mem_max). On loopback it
// matches autotuning (tcp_bench: ~2.3 GB/s per direction both ways); fixed,
// the window needs no ramp-up and does not depend on tcp_[rw]mem defaults.
constexpr int kDefaultSocketBufferBytes = 4 << 20;

int ReadSocketBufferBytes() {
  absl::StatusOr<int64_t> bytes =
      GetConfigInt("TCP_SOCKET_BUFFER_BYTES", kDefaultSocketBufferBytes);
  if (!bytes.ok()) {
    HVD_LOG(WARNING) << bytes.status().message() << "; using "
                     << kDefaultSocketBufferBytes;
    return kDefaultSocketBufferBytes;
  }
  return static_cast<int>(*bytes);
}

}  // namespace

int SocketBufferBytes() {
  static const int bytes = ReadSocketBufferBytes();
  return bytes;
}

}  // namespace hvd::transport::tcp_internal
