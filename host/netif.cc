#include "host/netif.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace hvd {
namespace host {
namespace {

int PollMs(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  return static_cast<int>(absl::ToInt64Milliseconds(d)) + 1;
}

}  // namespace

std::vector<InterfaceAddress> ListInterfaces() {
  std::vector<InterfaceAddress> out;
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (struct ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) {
      continue;
    }
    if (!(ifa->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<struct sockaddr_in*>(ifa->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) == nullptr) {
      continue;
    }
    InterfaceAddress a;
    a.name = ifa->ifa_name;
    a.address = buf;
    a.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(std::move(a));
  }
  freeifaddrs(list);
  return out;
}

bool IsLocalHost(absl::string_view host) {
  if (host == "localhost" || host == "::1" || absl::StartsWith(host, "127.")) {
    return true;
  }
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0) {
    absl::string_view self = name;
    if (host == self) return true;
    absl::string_view self_short = self.substr(0, self.find('.'));
    absl::string_view host_short = host.substr(0, host.find('.'));
    // "node1" given, "node1.cluster" here (or the reverse).
    if ((host == self_short || self == host_short) && !self_short.empty()) {
      return true;
    }
  }
  for (const InterfaceAddress& a : ListInterfaces()) {
    if (a.address == host) return true;
  }
  return false;
}

bool SplitHostPort(absl::string_view addr, std::string* host, int* port) {
  size_t colon = addr.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  if (!absl::SimpleAtoi(addr.substr(colon + 1), port) || *port <= 0 ||
      *port > 65535) {
    return false;
  }
  *host = std::string(addr.substr(0, colon));
  return true;
}

absl::StatusOr<std::unique_ptr<ProbeListener>> ProbeListener::Start(
    std::string nonce) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  }
  struct sockaddr_in sin = {};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(sin);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) < 0 ||
      listen(fd, 64) < 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) < 0) {
    int e = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("probe listener on 0.0.0.0: ", strerror(e)));
  }
  return std::unique_ptr<ProbeListener>(
      new ProbeListener(fd, ntohs(sin.sin_port), std::move(nonce)));
}

ProbeListener::ProbeListener(int fd, int port, std::string nonce)
    : fd_(fd), port_(port), nonce_(std::move(nonce)) {
  thread_ = std::thread([this] { Serve(); });
}

ProbeListener::~ProbeListener() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

void ProbeListener::Serve() {
  std::string answer = nonce_ + "\n";
  while (!stop_) {
    struct pollfd p = {fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // A short answer into an empty socket buffer does not block.
    (void)!write(c, answer.data(), answer.size());
    close(c);
  }
}

absl::Status ProbeAddress(const std::string& address, int port,
                          absl::string_view nonce, absl::Duration timeout) {
  const std::string who = absl::StrCat(address, ":", port);
  struct sockaddr_in sin = {};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &sin.sin_addr) != 1) {
    // A host name (a Kubernetes Service, say): its first IPv4 address.
    struct addrinfo hints = {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* found = nullptr;
    const int rc = getaddrinfo(address.c_str(), nullptr, &hints, &found);
    if (rc != 0 || found == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "cannot resolve ", address, " to an IPv4 address: ",
          rc != 0 ? gai_strerror(rc) : "no address"));
    }
    sin.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
    freeaddrinfo(found);
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  }
  absl::Time deadline = absl::Now() + timeout;
  auto fail = [&](absl::string_view why) {
    close(fd);
    return absl::UnavailableError(absl::StrCat(who, ": ", why));
  };
  if (connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) < 0) {
    if (errno != EINPROGRESS) return fail(strerror(errno));
    struct pollfd p = {fd, POLLOUT, 0};
    int r;
    do {
      r = poll(&p, 1, PollMs(deadline - absl::Now()));
    } while (r < 0 && errno == EINTR);
    if (r == 0) return fail("timed out");
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail(strerror(err));
  }
  if (!nonce.empty()) {
    std::string got;
    char buf[128];
    while (got.find('\n') == std::string::npos && got.size() < 256) {
      struct pollfd p = {fd, POLLIN, 0};
      int r = poll(&p, 1, PollMs(deadline - absl::Now()));
      if (r == 0) return fail("timed out waiting for the probe answer");
      if (r < 0 && errno == EINTR) continue;
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    got = got.substr(0, got.find('\n'));
    if (got != nonce) return fail("answered as another host");
  }
  close(fd);
  return absl::OkStatus();
}

absl::StatusOr<std::string> FirstReachable(
    const std::vector<std::string>& candidates, absl::Duration timeout) {
  // Probes run on detached threads sharing this state, so an early answer
  // does not wait for a slow candidate's timeout.
  struct State {
    absl::Mutex mu;
    std::vector<std::optional<absl::Status>> results;
    int done = 0;
  };
  auto state = std::make_shared<State>();
  state->results.resize(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::thread([state, i, c = candidates[i], timeout] {
      std::string host;
      int port;
      absl::Status s =
          SplitHostPort(c, &host, &port)
              ? ProbeAddress(host, port, "", timeout)
              : absl::InvalidArgumentError(absl::StrCat("bad address '", c, "'"));
      absl::MutexLock lock(&state->mu);
      state->results[i] = s;
      ++state->done;
    }).detach();
  }
  // In preference order: an earlier candidate that answers wins even if a
  // later one answered first.
  absl::MutexLock lock(&state->mu);
  while (true) {
    std::vector<std::string> errors;
    bool waiting = false;
    for (size_t i = 0; i < candidates.size() && !waiting; ++i) {
      if (!state->results[i].has_value()) {
        waiting = true;
      } else if (state->results[i]->ok()) {
        return candidates[i];
      } else {
        errors.emplace_back(state->results[i]->message());
      }
    }
    if (!waiting) {
      return absl::UnavailableError(absl::StrCat(
          "none of the rendezvous addresses is reachable: ",
          errors.empty() ? "none given" : absl::StrJoin(errors, "; ")));
    }
    const int seen = state->done;
    auto more = [&state, seen]() { return state->done > seen; };
    state->mu.Await(absl::Condition(&more));
  }
}

}  // namespace host
}  // namespace hvd
