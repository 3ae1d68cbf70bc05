#include "core/transport/tcp/tcp_context.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/annotate.h"
#include "core/transport/tcp/address.h"
#include "core/transport/tcp/address_book.h"
#include "core/transport/tcp/context_core.h"
#include "core/transport/tcp/mesh_connector.h"
#include "core/transport/tcp/socket_options.h"
#include "core/transport/tcp/tcp_context_impl.h"

namespace hvd::transport {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using tcp_internal::Connection;
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

// Publishes `own` and returns the dial candidates of each lower rank, from
// the address book rank 0 gathers (address_book.h).
absl::StatusOr<std::vector<std::vector<Endpoint>>> ExchangeAddresses(
    int rank, int size, const tcp_internal::PeerRecord& own, Store* store,
    const TcpOptions& options, absl::Time deadline) {
  absl::StatusOr<std::vector<tcp_internal::PeerRecord>> records =
      tcp_internal::ExchangeAddressBook(rank, size, own, *store,
                                        deadline - absl::Now());
  if (!records.ok()) return records.status();
  std::vector<std::vector<Endpoint>> candidates(rank);
  for (int peer = 0; peer < rank; ++peer) {
    candidates[peer] =
        tcp_internal::DialCandidates((*records)[peer], options.hostname);
  }
  return candidates;
}

absl::StatusOr<std::vector<std::optional<Connection>>> ConnectMesh(
    int rank, int size, Store* store, const TcpOptions& options,
    asio::io_context& io) {
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  absl::StatusOr<std::optional<tcp_internal::Ipv4>> bind =
      tcp_internal::ResolveInterface(options.iface);
  if (!bind.ok())
    return Annotate(bind.status(), absl::StrCat("rank ", rank));
  tcp::acceptor acceptor(io);
  if (absl::Status s =
          Listen(rank, *bind, options.tuning.socket_buffer_bytes, acceptor);
      !s.ok()) {
    return s;
  }
  const tcp_internal::PeerRecord own =
      OwnRecord(*bind, acceptor.local_endpoint().port(), options);
  absl::StatusOr<std::vector<std::vector<Endpoint>>> candidates =
      ExchangeAddresses(rank, size, own, store, options, deadline);
  if (!candidates.ok()) return candidates.status();
  tcp_internal::MeshConnector::Config config;
  config.rank = rank;
  config.size = size;
  config.token = options.token;
  config.deadline = deadline;
  config.timeout = options.connect_timeout;
  config.socket_buffer_bytes = options.tuning.socket_buffer_bytes;
  config.cancel = options.cancel;
  tcp_internal::MeshConnector connector(io, acceptor, std::move(config));
  return connector.Run(*std::move(candidates));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Context>> CreateTcpContext(
    int rank, int size, Store* store, const TcpOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateTcpContext: rank ", rank, " is not in a job of size ", size));
  }
  if (store == nullptr && size > 1) {
    return absl::InvalidArgumentError("CreateTcpContext: no store");
  }
  auto io = std::make_unique<asio::io_context>();
  std::vector<std::optional<Connection>> connections(size);
  if (size > 1) {
    absl::StatusOr<std::vector<std::optional<Connection>>> mesh =
        ConnectMesh(rank, size, store, options, *io);
    if (!mesh.ok()) return mesh.status();
    connections = *std::move(mesh);
  }
  auto core = std::make_shared<tcp_internal::Core>(
      rank, size, std::move(io), options.tuning);
  for (int peer = 0; peer < size; ++peer) {
    if (!connections[peer]) continue;
    tcp_internal::SetNoDelay(connections[peer]->socket);
    core->AddPair(std::make_unique<tcp_internal::Pair>(
        rank, peer, std::move(connections[peer]->address),
        std::move(connections[peer]->socket), core.get()));
  }
  core->Start();
  return std::make_unique<tcp_internal::TcpContext>(std::move(core));
}

}  // namespace hvd::transport
