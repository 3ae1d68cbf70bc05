// hvdrun's whole life, from its arguments to its exit code, so tests can run
// it in-process as well as through the binary.
#ifndef HVD_LAUNCHER_HVDRUN_H_
#define HVD_LAUNCHER_HVDRUN_H_

#include <string>
#include <vector>

namespace hvd {
namespace launcher {

// `args`: argv[1..]. Exit codes: see HelpText(). Blocks SIGINT, SIGTERM and
// SIGHUP in the calling thread and handles them on a thread of its own.
int HvdrunMain(const std::vector<std::string>& args);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_HVDRUN_H_
