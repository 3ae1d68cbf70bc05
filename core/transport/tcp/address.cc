#include "core/transport/tcp/address.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hvd::transport::tcp_internal {
namespace {

constexpr absl::string_view kRecordVersion = "hvd-tcp-1";

struct Interface {
  std::string name;
  Ipv4 address;
};

// Up interfaces with an IPv4 address, in the kernel's order.
std::vector<Interface> UpInterfaces() {
  std::vector<Interface> result;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return result;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET)
      continue;
    if ((ifa->ifa_flags & IFF_UP) == 0) continue;
    const auto* sin = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr);
    result.push_back({ifa->ifa_name, Ipv4(ntohl(sin->sin_addr.s_addr))});
  }
  freeifaddrs(list);
  return result;
}

std::string DescribeInterfaces(const std::vector<Interface>& interfaces) {
  if (interfaces.empty()) return "none";
  return absl::StrJoin(
      interfaces, ", ", [](std::string* out, const Interface& i) {
        absl::StrAppend(out, i.name, "=", i.address.to_string());
      });
}

}  // namespace

absl::StatusOr<std::optional<Ipv4>> ResolveInterface(absl::string_view iface) {
  if (iface.empty()) return std::optional<Ipv4>();
  if (std::optional<Ipv4> literal = ParseIpv4(iface)) return literal;
  const std::vector<Interface> interfaces = UpInterfaces();
  for (const Interface& i : interfaces) {
    if (i.name == iface) return std::optional<Ipv4>(i.address);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "network interface '", iface,
      "' is neither an IPv4 address nor an up interface with one (up IPv4 "
      "interfaces: ",
      DescribeInterfaces(interfaces), ")"));
}

std::vector<Ipv4> UpInterfaceAddresses() {
  std::vector<Ipv4> others;
  std::vector<Ipv4> loopback;
  for (const Interface& i : UpInterfaces()) {
    (i.address.is_loopback() ? loopback : others).push_back(i.address);
  }
  others.insert(others.end(), loopback.begin(), loopback.end());
  return others;
}

std::optional<Ipv4> ParseIpv4(absl::string_view text) {
  boost::system::error_code ec;
  const Ipv4 ip = boost::asio::ip::make_address_v4(std::string(text), ec);
  if (ec) return std::nullopt;
  return ip;
}

std::optional<unsigned short> ParsePort(absl::string_view text) {
  uint32_t port = 0;
  if (!absl::SimpleAtoi(text, &port) || port == 0 || port > 65535) {
    return std::nullopt;
  }
  return static_cast<unsigned short>(port);
}

namespace {

// "1.2.3.4:567".
absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text) {
  const size_t colon = text.rfind(':');
  const std::optional<unsigned short> port =
      colon == absl::string_view::npos ? std::nullopt
                                       : ParsePort(text.substr(colon + 1));
  const std::optional<Ipv4> ip =
      port ? ParseIpv4(text.substr(0, colon)) : std::nullopt;
  if (!ip) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad endpoint '", text, "'"));
  }
  return Endpoint(*ip, *port);
}

}  // namespace

std::string EndpointString(const Endpoint& endpoint) {
  return absl::StrCat(endpoint.address().to_string(), ":", endpoint.port());
}

std::string EndpointListString(const std::vector<Endpoint>& endpoints) {
  return absl::StrJoin(endpoints, ", ",
                       [](std::string* out, const Endpoint& e) {
                         out->append(EndpointString(e));
                       });
}

std::string EncodePeerRecord(const PeerRecord& record) {
  return absl::StrCat(kRecordVersion, "\n", record.hostname, "\n",
                      absl::StrJoin(record.endpoints, ",",
                                    [](std::string* out, const Endpoint& e) {
                                      out->append(EndpointString(e));
                                    }));
}

absl::StatusOr<PeerRecord> DecodePeerRecord(absl::string_view text) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad TCP peer record (", why, "): '",
                     absl::CHexEscape(text.substr(0, 200)),
                     text.size() > 200 ? "...'" : "'"));
  };
  if (lines.size() != 3 || lines[0] != kRecordVersion) return bad("format");
  PeerRecord record;
  record.hostname = std::string(lines[1]);
  for (absl::string_view item :
       absl::StrSplit(lines[2], ',', absl::SkipEmpty())) {
    absl::StatusOr<Endpoint> endpoint = ParseEndpoint(item);
    if (!endpoint.ok()) return bad(endpoint.status().message());
    record.endpoints.push_back(*endpoint);
  }
  if (record.endpoints.empty()) return bad("no endpoints");
  return record;
}

std::vector<Endpoint> DialCandidates(const PeerRecord& peer,
                                     absl::string_view my_hostname) {
  std::vector<Endpoint> loopback;
  std::vector<Endpoint> others;
  for (const Endpoint& e : peer.endpoints) {
    (e.address().is_loopback() ? loopback : others).push_back(e);
  }
  const bool same_host = !my_hostname.empty() && my_hostname == peer.hostname;
  if (same_host) {
    loopback.insert(loopback.end(), others.begin(), others.end());
    return loopback;
  }
  return others.empty() ? loopback : others;
}

}  // namespace hvd::transport::tcp_internal
