// `hvdrun --self-test`: turns the command line into a job of one
// hvd-selftest worker per host (self_test_worker.cc), which measures every
// pair of hosts and the whole job and names what is slow.
#ifndef HVD_LAUNCHER_SELF_TEST_H_
#define HVD_LAUNCHER_SELF_TEST_H_

#include <string>

#include "absl/status/status.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {

// Rewrites `o` (self_test set) into that job: the hosts of -H or --hostfile
// (default: localhost) with one slot each, -np their number, and the
// command `worker --threshold F --bytes B`. InvalidArgument, saying why, for a command
// or -np given with --self-test, or a host list that does not parse.
absl::Status PrepareSelfTest(Options* o, const std::string& worker);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_SELF_TEST_H_
