// Which addresses a rank listens on, publishes, and dials.
//
// A rank publishes a PeerRecord (its host name and candidate endpoints) under
// "tcp/<rank>"; a dialer orders the candidates with DialCandidates. All
// functions are thread-compatible and hold no state.
#ifndef HVD_CORE_TRANSPORT_TCP_ADDRESS_H_
#define HVD_CORE_TRANSPORT_TCP_ADDRESS_H_

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hvd::transport::tcp_internal {

using Endpoint = boost::asio::ip::tcp::endpoint;
using Ipv4 = boost::asio::ip::address_v4;

// Resolves TcpOptions::iface: nullopt for "" (bind every interface), the
// address itself for an IPv4 literal, else the IPv4 address of the named up
// interface. InvalidArgument naming the interface and listing the available
// ones when there is no such up interface with an IPv4 address.
absl::StatusOr<std::optional<Ipv4>> ResolveInterface(absl::string_view iface);

// The IPv4 addresses of every up interface: non-loopback ones first (in the
// kernel's order), loopback ones last.
std::vector<Ipv4> UpInterfaceAddresses();

// What a rank publishes about its listener.
struct PeerRecord {
  std::string hostname;
  std::vector<Endpoint> endpoints;  // the publisher's preference order
};

std::string EncodePeerRecord(const PeerRecord& record);
// InvalidArgument quoting the text when it is not an encoded PeerRecord.
absl::StatusOr<PeerRecord> DecodePeerRecord(absl::string_view text);

// The endpoints a dialer on host `my_hostname` tries, in order. On the same
// host (equal, non-empty names) loopback endpoints come first. On another host
// loopback endpoints are dropped (they would reach some local process) unless
// the peer published nothing else.
std::vector<Endpoint> DialCandidates(const PeerRecord& peer,
                                     absl::string_view my_hostname);

// "1.2.3.4" and "567" (1 to 65535); nullopt when the text is not one.
std::optional<Ipv4> ParseIpv4(absl::string_view text);
std::optional<unsigned short> ParsePort(absl::string_view text);

// "1.2.3.4:567".
std::string EndpointString(const Endpoint& endpoint);
std::string EndpointListString(const std::vector<Endpoint>& endpoints);

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_ADDRESS_H_
