// Socket settings every data connection gets.
#ifndef HVD_CORE_TRANSPORT_TCP_SOCKET_OPTIONS_H_
#define HVD_CORE_TRANSPORT_TCP_SOCKET_OPTIONS_H_

#include <boost/asio/ip/tcp.hpp>

namespace hvd::transport::tcp_internal {

// Sets SO_SNDBUF/SO_RCVBUF to `bytes` (TcpTuning::socket_buffer_bytes; 0
// leaves the kernel's autotuning alone). Call before connect/listen so that
// the TCP window scale accounts for them; accepted sockets inherit the
// listener's.
template <typename Socket>
void SetBufferSizes(Socket& socket, int bytes) {
  if (bytes <= 0) return;
  boost::system::error_code ignored;
  socket.set_option(boost::asio::socket_base::send_buffer_size(bytes), ignored);
  socket.set_option(boost::asio::socket_base::receive_buffer_size(bytes),
                    ignored);
}

// TCP_NODELAY: a message's header and payload go out at once, and small
// messages are latency-bound.
inline void SetNoDelay(boost::asio::ip::tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
}

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_SOCKET_OPTIONS_H_
