// Network interfaces and reachability: which addresses this host has, whether
// a host name means this machine, and the TCP probes by which hosts find out
// which of one another's addresses they can reach (a listener that answers
// with a nonce, and the prober). hvdrun picks each host's data-plane address
// from the probes' results.
#ifndef HVD_HOST_NETIF_H_
#define HVD_HOST_NETIF_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hvd {
namespace host {

struct InterfaceAddress {
  std::string name;     // "eth0"
  std::string address;  // IPv4 dotted quad
  bool loopback = false;
};

// IPv4 addresses of the interfaces that are up, in the kernel's order.
std::vector<InterfaceAddress> ListInterfaces();

// Whether `host` names this machine: "localhost", a 127/8 address, this
// machine's host name (short or full), or one of its interface addresses.
// No DNS lookup: a name that only DNS maps here counts as remote (and works,
// over ssh).
bool IsLocalHost(absl::string_view host);

// Parses "a.b.c.d:port".
bool SplitHostPort(absl::string_view addr, std::string* host, int* port);

// Accepts TCP connections on every address (0.0.0.0, any port) and answers
// each with `nonce` and a newline, so a prober can tell this host from
// another one that happens to have the same address (docker0 172.17.0.1 on
// every machine). Stops and joins its thread on destruction.
class ProbeListener {
 public:
  static absl::StatusOr<std::unique_ptr<ProbeListener>> Start(
      std::string nonce);
  ~ProbeListener();
  ProbeListener(const ProbeListener&) = delete;
  ProbeListener& operator=(const ProbeListener&) = delete;
  int port() const { return port_; }

 private:
  ProbeListener(int fd, int port, std::string nonce);
  void Serve();
  int fd_;
  int port_;
  std::string nonce_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One TCP connect to address:port within `timeout`; if `nonce` is not empty
// the peer must answer it. Unavailable with the reason ("connection refused",
// "no route to host", "timed out", "answered as another host") otherwise.
absl::Status ProbeAddress(const std::string& address, int port,
                          absl::string_view nonce, absl::Duration timeout);

// The first of `candidates` ("a.b.c.d:port") that accepts a TCP connection
// within `timeout`, trying all at once and preferring earlier ones.
// Unavailable listing each candidate's error when none does.
absl::StatusOr<std::string> FirstReachable(
    const std::vector<std::string>& candidates, absl::Duration timeout);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_NETIF_H_
