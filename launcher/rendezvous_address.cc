#include "launcher/rendezvous_address.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "host/netif.h"
#include "host/process.h"

namespace hvd {
namespace launcher {

std::vector<std::string> LauncherAddresses(
    const std::vector<std::string>& wanted) {
  std::vector<std::string> named, all;
  for (const host::InterfaceAddress& a : host::ListInterfaces()) {
    if (a.loopback) continue;
    all.push_back(a.address);
    for (const std::string& want : wanted) {
      if (a.name == want || a.address == want) named.push_back(a.address);
    }
  }
  return named.empty() ? all : named;
}

std::string RendezvousAddressList(const std::vector<std::string>& wanted,
                                  int port) {
  std::vector<std::string> addrs = LauncherAddresses(wanted);
  if (addrs.empty()) addrs = {"127.0.0.1"};
  for (std::string& a : addrs) a = absl::StrCat(a, ":", port);
  return absl::StrJoin(addrs, ",");
}

bool AnnounceRendezvous(const std::string& file, const std::string& addr,
                        const std::string& token) {
  if (file.empty()) {
    std::printf("HVD_RENDEZVOUS_ADDR=%s\nHVD_JOB_TOKEN=%s\n", addr.c_str(),
                token.c_str());
    std::fflush(stdout);
    return true;
  }
  const int fd = open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC,
                      0600);
  if (fd < 0) return false;
  const bool written =
      fchmod(fd, 0600) == 0 &&
      host::WriteAll(fd, absl::StrCat("HVD_RENDEZVOUS_ADDR=", addr,
                                      "\nHVD_JOB_TOKEN=", token, "\n"))
          .ok();
  if (close(fd) != 0 || !written) return false;
  std::printf("HVD_RENDEZVOUS_ADDR=%s\n", addr.c_str());
  std::fflush(stdout);
  return true;
}

}  // namespace launcher
}  // namespace hvd
