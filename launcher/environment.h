// The environment hvdrun hands its workers: what it forwards from the
// submitting shell and the tunables its flags set (the agent adds each
// worker's identity: host/worker_environment.h).
#ifndef HVD_LAUNCHER_ENVIRONMENT_H_
#define HVD_LAUNCHER_ENVIRONMENT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {

// [A-Za-z_][A-Za-z0-9_]*
bool IsValidVariableName(absl::string_view name);

// Variables that describe one host or one login session (HOSTNAME, PWD,
// SSH_*, DISPLAY, ...) and hvd's per-worker identity variables: never
// forwarded unless named with -x.
bool IsExcludedVariable(absl::string_view name);
// The exclusion list in words, for --help and docs.
std::string ExcludedVariablesDescription();

// What hvdrun forwards: `env` ("NAME=VALUE" entries) minus excluded
// variables, then each -x entry applied in order: "NAME" forwards NAME even
// if excluded (ignored when unset, as mpirun does), "NAME=VALUE" sets it.
std::map<std::string, std::string> ForwardedEnvironment(
    const std::vector<std::string>& env, const std::vector<std::string>& x);

// hvd's identity variables given to hvdrun itself. hvdrun sets each
// worker's, so -x of one is a usage error (InvalidArgument), with one
// exception: HVD_IFACE (or HOROVOD_IFACE), given with -x or in `env` outside
// an hvd worker (no HVD_RANK there), names the data-plane interfaces as
// --network-interfaces does, and is copied there; InvalidArgument when the
// two disagree.
absl::Status ApplyIdentityVariables(const std::vector<std::string>& env,
                                    Options* options);

// HVD_* (and HOROVOD_*) variables for the tunable flags that were given.
std::map<std::string, std::string> TunableEnvironment(const Options& options);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_ENVIRONMENT_H_
