// What a TCP context is built with: who this rank is on the network, and the
// knobs of its data path. Plain data: the core's configuration fills it once
// at init (HVD_TCP_* variables); the transport reads no environment.
#ifndef HVD_CORE_TRANSPORT_TCP_TCP_OPTIONS_H_
#define HVD_CORE_TRANSPORT_TCP_TCP_OPTIONS_H_

#include <cstddef>
#include <string>

#include "absl/time/time.h"

namespace hvd::transport {

// The data path's knobs; the defaults are the measured best on the
// development machines (docs/performance.md).
struct TcpTuning {
  // How long Request::Wait polls its pair before it sleeps
  // (HVD_TCP_SPIN_US). Spinning costs CPU only while a reply is imminent;
  // on an oversubscribed host lower it.
  absl::Duration spin = absl::Microseconds(50);
  // Receives of at least this many bytes are watched by the io thread as
  // soon as they are posted; smaller ones once a waiter blocks
  // (HVD_TCP_LAZY_RECV_BYTES; 0 watches every receive at once).
  size_t lazy_recv_bytes = size_t{64} << 10;
  // SO_SNDBUF/SO_RCVBUF of every data socket (HVD_TCP_SOCKET_BUFFER_BYTES;
  // the kernel doubles it, up to net.core.[rw]mem_max). 0 leaves the
  // kernel's autotuning alone; fixed, the window needs no ramp-up.
  int socket_buffer_bytes = 4 << 20;
};

struct TcpOptions {
  // Interface name ("eth0") or IPv4 address to bind and publish; empty: bind
  // all.
  std::string iface;
  // This process's host name (peers on the same host prefer loopback).
  std::string hostname;
  // Job token: checked in the connection handshake (never logged).
  std::string token;
  // How long the address exchange at creation, and each connection to a
  // peer (made when the first message to or from it is posted), may take.
  absl::Duration connect_timeout = absl::Seconds(30);
  TcpTuning tuning;
};

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_TCP_TCP_OPTIONS_H_
