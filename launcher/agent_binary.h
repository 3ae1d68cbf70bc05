// Where hvd-agent is: the binary hvdrun runs for the hosts it starts by
// fork/exec, and the name it asks ssh or srun to run on the others.
#ifndef HVD_LAUNCHER_AGENT_BINARY_H_
#define HVD_LAUNCHER_AGENT_BINARY_H_

#include <string>

#include "absl/status/statusor.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {

// The directory of the running hvdrun binary; empty if /proc cannot say.
std::string HvdrunDir();

// The agent for hosts hvdrun starts itself: --agent-path, else
// $HVD_AGENT_PATH (either looked up on PATH when a bare name), else the one
// next to hvdrun (installed), in ../agent/ (bazel-bin), or on PATH.
// NotFound, saying to give --agent-path, when there is none.
absl::StatusOr<std::string> LocalAgentPath(const Options& o);

// The agent other hosts run: --agent-path, $HVD_AGENT_PATH, or
// "hvd-agent" (found on that host's PATH).
std::string RemoteAgentPath(const Options& o);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_AGENT_BINARY_H_
