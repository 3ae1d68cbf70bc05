// What hvdrun hands an agent it starts, on the agent's stdin (over ssh for a
// remote host): never on a command line, where `ps` on that host would show
// the job token to every user.
#ifndef HVD_HOST_BOOTSTRAP_H_
#define HVD_HOST_BOOTSTRAP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hvd {
namespace host {

struct Bootstrap {
  std::string token;
  int host_index = 0;
  std::string host_name;  // as given in -H; the workers' HVD_HOSTNAME
  // "a.b.c.d:port" candidates for the rendezvous server, preferred first; the
  // agent takes the first it can connect to.
  std::vector<std::string> rendezvous;
  bool verbose = false;
  // How long the agent keeps trying to reach the rendezvous (hvdrun's
  // --start-timeout).
  absl::Duration connect_timeout = absl::Seconds(30);
  // Whether the agent opens its reachability listener (for choosing data-
  // plane addresses by probing); a one-host job, or one with named
  // interfaces, does not probe, and its agent listens on nothing.
  bool probe = true;
  // TLS to the rendezvous: the job's CA certificate (PEM) and the name the
  // server's certificate carries; empty: plaintext.
  std::string tls_ca_pem;
  std::string tls_name;

  // A launch tree (hvdrun --launch-fanout): every host below this one, each
  // with the index of the host whose agent starts it. This agent starts
  // those whose parent is its own host_index, over ssh as hvdrun would,
  // each told of the hosts below it in turn. Empty: a leaf.
  struct Below {
    int index = 0;
    int parent = 0;
    std::string name;
  };
  std::vector<Below> below;
  // How the hosts below are reached (set when `below` is not empty): the
  // agent binary there, and hvdrun's ssh options, which must work from
  // this host too (a shared home, or the same key and config everywhere).
  std::string agent_path;
  int ssh_port = 0;  // 0: ssh's default
  std::string ssh_identity_file;
  std::string ssh_config_file;
};

// Text lines "key value", ending with "end".
std::string SerializeBootstrap(const Bootstrap& b);
absl::StatusOr<Bootstrap> ParseBootstrap(const std::string& text);

// Reads a serialized Bootstrap from `fd` (the agent's stdin) up to its "end"
// line. DeadlineExceeded when it does not arrive within `timeout`;
// InvalidArgument when the text is malformed or the stream ends first.
absl::StatusOr<Bootstrap> ReadBootstrap(int fd, absl::Duration timeout);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_BOOTSTRAP_H_
