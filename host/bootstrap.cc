#include "host/bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hvd {
namespace host {
namespace {
constexpr char kMagic[] = "hvd-agent-bootstrap 1";
// A launch tree's root agents read a line per host below them.
constexpr size_t kMaxBootstrapBytes = size_t{4} << 20;
}  // namespace

std::string SerializeBootstrap(const Bootstrap& b) {
  std::string text = absl::StrCat(
      kMagic, "\n", "token ", b.token, "\n", "host_index ", b.host_index,
      "\n", "host_name ", b.host_name, "\n", "rendezvous ",
      absl::StrJoin(b.rendezvous, ","), "\n", "verbose ", b.verbose ? 1 : 0,
      "\n", "probe ", b.probe ? 1 : 0, "\n", "connect_timeout_ms ",
      absl::ToInt64Milliseconds(b.connect_timeout), "\n", "tls_ca ",
      absl::Base64Escape(b.tls_ca_pem), "\n", "tls_name ", b.tls_name, "\n");
  if (!b.below.empty()) {
    absl::StrAppend(&text, "agent_path ", b.agent_path, "\n", "ssh_port ",
                    b.ssh_port, "\n", "ssh_identity ", b.ssh_identity_file,
                    "\n", "ssh_config ", b.ssh_config_file, "\n");
    for (const Bootstrap::Below& h : b.below) {
      absl::StrAppend(&text, "below ", h.index, " ", h.parent, " ", h.name,
                      "\n");
    }
  }
  return text + "end\n";
}

absl::StatusOr<Bootstrap> ParseBootstrap(const std::string& text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || lines[0] != kMagic) {
    return absl::InvalidArgumentError(
        "not an hvd-agent bootstrap (started by a different hvdrun version?)");
  }
  Bootstrap b;
  bool ended = false;
  for (size_t i = 1; i < lines.size() && !ended; ++i) {
    absl::string_view line = lines[i];
    size_t sp = line.find(' ');
    absl::string_view key = line.substr(0, sp);
    absl::string_view value =
        sp == absl::string_view::npos ? "" : line.substr(sp + 1);
    if (key == "end") {
      ended = true;
    } else if (key == "token") {
      b.token = std::string(value);
    } else if (key == "host_index") {
      if (!absl::SimpleAtoi(value, &b.host_index)) {
        return absl::InvalidArgumentError("bootstrap: bad host_index");
      }
    } else if (key == "host_name") {
      b.host_name = std::string(value);
    } else if (key == "rendezvous") {
      b.rendezvous = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (key == "verbose") {
      b.verbose = value == "1";
    } else if (key == "probe") {
      b.probe = value != "0";
    } else if (key == "connect_timeout_ms") {
      int64_t ms;
      if (!absl::SimpleAtoi(value, &ms) || ms <= 0) {
        return absl::InvalidArgumentError("bootstrap: bad connect_timeout_ms");
      }
      b.connect_timeout = absl::Milliseconds(ms);
    } else if (key == "tls_ca") {
      if (!absl::Base64Unescape(value, &b.tls_ca_pem)) {
        return absl::InvalidArgumentError("bootstrap: bad tls_ca");
      }
    } else if (key == "tls_name") {
      b.tls_name = std::string(value);
    } else if (key == "agent_path") {
      b.agent_path = std::string(value);
    } else if (key == "ssh_port") {
      if (!absl::SimpleAtoi(value, &b.ssh_port) || b.ssh_port < 0) {
        return absl::InvalidArgumentError("bootstrap: bad ssh_port");
      }
    } else if (key == "ssh_identity") {
      b.ssh_identity_file = std::string(value);
    } else if (key == "ssh_config") {
      b.ssh_config_file = std::string(value);
    } else if (key == "below") {
      std::vector<absl::string_view> f =
          absl::StrSplit(value, absl::MaxSplits(' ', 2));
      Bootstrap::Below h;
      if (f.size() != 3 || !absl::SimpleAtoi(f[0], &h.index) ||
          !absl::SimpleAtoi(f[1], &h.parent) || f[2].empty()) {
        return absl::InvalidArgumentError("bootstrap: bad below line");
      }
      h.name = std::string(f[2]);
      b.below.push_back(std::move(h));
    }
  }
  if (!ended) return absl::InvalidArgumentError("bootstrap: truncated");
  if (b.token.empty() || b.rendezvous.empty()) {
    return absl::InvalidArgumentError(
        "bootstrap: token or rendezvous address missing");
  }
  return b;
}

absl::StatusOr<Bootstrap> ReadBootstrap(int fd, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  static constexpr char kEnd[] = "\nend\n";
  constexpr size_t kEndSize = sizeof(kEnd) - 1;
  std::string text;
  size_t searched = 0;  // where "\nend\n" cannot start before
  char buf[16384];
  while (text.find(kEnd, searched) == std::string::npos) {
    searched = text.size() < kEndSize ? 0 : text.size() - kEndSize + 1;
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no bootstrap on stdin within ", absl::FormatDuration(timeout),
          " (hvd-agent is started by hvdrun; use --rendezvous to join a job "
          "by hand)"));
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InvalidArgumentError(
          "stdin ended before the bootstrap did");
    }
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxBootstrapBytes) {
      return absl::InvalidArgumentError("bootstrap too long");
    }
  }
  return ParseBootstrap(text);
}

}  // namespace host
}  // namespace hvd
