// Where hvdrun's rendezvous can be reached, and telling an orchestrator so
// (hvdrun --rendezvous-only).
#ifndef HVD_LAUNCHER_RENDEZVOUS_ADDRESS_H_
#define HVD_LAUNCHER_RENDEZVOUS_ADDRESS_H_

#include <string>
#include <vector>

namespace hvd {
namespace launcher {

// This machine's non-loopback addresses an agent elsewhere may dial,
// preferred first: those of the interfaces `wanted` names (by name or
// address) if this machine has them, else all of them.
std::vector<std::string> LauncherAddresses(
    const std::vector<std::string>& wanted);

// Every address LauncherAddresses(wanted) gives (127.0.0.1 when there is
// none) with `port`, comma-separated: which one a node can reach is for the
// node to find out; hvd-agent takes a list.
std::string RendezvousAddressList(const std::vector<std::string>& wanted,
                                  int port);

// Tells the orchestrator where the rendezvous is and the job token: both
// into `file` (created with mode 0600) and only the address on stdout, or,
// when `file` is empty, both on stdout. False when `file` cannot be
// written.
bool AnnounceRendezvous(const std::string& file, const std::string& addr,
                        const std::string& token);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_RENDEZVOUS_ADDRESS_H_
