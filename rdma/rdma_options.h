// What an RDMA context is built with. Plain data: the core's configuration
// fills it once at init (HVD_RDMA_PROVIDER); the transport reads no
// environment.
#ifndef HVD_RDMA_RDMA_OPTIONS_H_
#define HVD_RDMA_RDMA_OPTIONS_H_

#include <cstddef>
#include <string>

#include "absl/time/time.h"

namespace hvd::rdma {

struct RdmaTuning {
  // Control messages each rank may have outstanding to one peer (adverts,
  // eager messages, data writes); the receiver pre-posts this many buffers
  // per peer. The sender of a message without a credit queues it.
  int credits = 32;
  // RecvAny messages up to this many bytes travel inside a control message;
  // larger ones are written by RMA into a buffer the receiver sizes and
  // advertises. At most kControlBytes minus the header (wire.h).
  size_t eager_bytes = 4096;
  // The largest region one registration covers: a longer buffer is
  // registered (and written) in pieces of at most this size.
  size_t max_registration_bytes = size_t{64} << 20;
  // Bytes of writes to one peer posted but not yet delivered (acknowledged
  // by the peer's provider); 0: no limit. Whatever this rank sends the same
  // peer later (an advert above all) queues behind them: on the tcp provider
  // at 1 Gbit/s, 1 MiB is 8 ms.
  size_t write_window_bytes = size_t{512} << 10;
  // The longest single write (at least 1), so that the window fills in steps.
  size_t write_piece_bytes = size_t{128} << 10;
};

struct RdmaOptions {
  // libfabric provider name ("verbs", "efa", "tcp", ...); empty: the first
  // provider that offers RMA with remote CQ data on a reliable endpoint.
  std::string provider;
  // This process's host name, for messages.
  std::string hostname;
  // Job token: checked in the connection handshake (never logged).
  std::string token;
  absl::Duration connect_timeout = absl::Seconds(30);
  // While requests to or from a peer are pending and it has been silent, it
  // is probed; a probe the fabric has not delivered within this long means
  // the peer is gone, though the provider says nothing (libfabric's rxm
  // retries a refused connection without reporting it).
  absl::Duration probe_timeout = absl::Seconds(30);
  RdmaTuning tuning;
};

}  // namespace hvd::rdma

#endif  // HVD_RDMA_RDMA_OPTIONS_H_
