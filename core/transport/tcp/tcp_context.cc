#include "core/transport/tcp/tcp_context.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/annotate.h"
#include "core/transport/tcp/address.h"
#include "core/transport/tcp/context_core.h"
#include "core/transport/tcp/peer_connector.h"
#include "core/transport/tcp/peer_lookup.h"
#include "core/transport/tcp/socket_options.h"
#include "core/transport/tcp/tcp_context_impl.h"

namespace hvd::transport {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using tcp_internal::Endpoint;

absl::Status Listen(int rank, const std::optional<tcp_internal::Ipv4>& bind,
                    int socket_buffer_bytes, tcp::acceptor& acceptor) {
  const Endpoint endpoint(bind.value_or(asio::ip::address_v4::any()), 0);
  boost::system::error_code ec;
  acceptor.open(tcp::v4(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) tcp_internal::SetBufferSizes(acceptor, socket_buffer_bytes);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", rank, ": cannot listen on ",
        tcp_internal::EndpointString(endpoint), ": ", ec.message()));
  }
  return absl::OkStatus();
}

tcp_internal::PeerRecord OwnRecord(
    const std::optional<tcp_internal::Ipv4>& bind, unsigned short port,
    const TcpOptions& options) {
  tcp_internal::PeerRecord record;
  record.hostname = options.hostname;
  if (bind) {
    record.endpoints.emplace_back(*bind, port);
    return record;
  }
  for (const auto& address : tcp_internal::UpInterfaceAddresses()) {
    record.endpoints.emplace_back(address, port);
  }
  if (record.endpoints.empty()) {
    record.endpoints.emplace_back(asio::ip::address_v4::loopback(), port);
  }
  return record;
}

// Listens and publishes this rank's record; adds one unconnected pair per
// peer to `core`, and the connector that looks peers up in `store` and
// connects them.
absl::Status Prepare(int rank, int size, std::shared_ptr<Store> store,
                     const TcpOptions& options, tcp_internal::Core& core) {
  absl::StatusOr<std::optional<tcp_internal::Ipv4>> bind =
      tcp_internal::ResolveInterface(options.iface);
  if (!bind.ok()) return Annotate(bind.status(), absl::StrCat("rank ", rank));
  tcp::acceptor acceptor(core.io());
  if (absl::Status s =
          Listen(rank, *bind, options.tuning.socket_buffer_bytes, acceptor);
      !s.ok()) {
    return s;
  }
  const tcp_internal::PeerRecord own =
      OwnRecord(*bind, acceptor.local_endpoint().port(), options);
  if (absl::Status s = store->Set(absl::StrCat(tcp_internal::kRecordKey, rank),
                                  tcp_internal::EncodePeerRecord(own));
      !s.ok()) {
    return Annotate(s, absl::StrCat("rank ", rank, ": publishing its address"));
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    core.AddPair(std::make_unique<tcp_internal::Pair>(rank, peer, core.io(),
                                                      &core));
  }
  tcp_internal::PeerConnector::Config config;
  config.rank = rank;
  config.size = size;
  config.token = options.token;
  config.connect_timeout = options.connect_timeout;
  config.socket_buffer_bytes = options.tuning.socket_buffer_bytes;
  core.SetConnector(std::make_unique<tcp_internal::PeerConnector>(
      core.io(), std::move(acceptor), std::move(config),
      tcp_internal::StoreLookup(std::move(store), options.hostname), &core));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Context>> CreateTcpContext(
    int rank, int size, std::shared_ptr<Store> store,
    const TcpOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateTcpContext: rank ", rank, " is not in a job of size ", size));
  }
  if (store == nullptr && size > 1) {
    return absl::InvalidArgumentError("CreateTcpContext: no store");
  }
  auto core = std::make_shared<tcp_internal::Core>(
      rank, size, std::make_unique<asio::io_context>(), options.tuning);
  if (size > 1) {
    if (absl::Status s = Prepare(rank, size, std::move(store), options, *core);
        !s.ok()) {
      return s;
    }
  }
  core->Start();
  return std::make_unique<tcp_internal::TcpContext>(std::move(core));
}

}  // namespace hvd::transport
