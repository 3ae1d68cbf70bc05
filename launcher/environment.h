// The environment of workers: what hvdrun forwards from the submitting shell,
// the tunables its flags set, and the identity variables each worker gets.
#ifndef HVD_LAUNCHER_ENVIRONMENT_H_
#define HVD_LAUNCHER_ENVIRONMENT_H_

#include <map>
#include <string>
#include <vector>

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

// HVD_* (and HOROVOD_*) variables for the tunable flags that were given.
std::map<std::string, std::string> TunableEnvironment(const Options& options);

struct WorkerIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string hostname;
  std::string rendezvous_addr;
  std::string job_token;
  std::string iface;  // HVD_IFACE; empty: not set
};

// A worker's whole environment, "NAME=VALUE" entries: `base` (the agent's
// own environment), with `overlay` on top, then the identity variables in
// both spellings (HVD_RANK and HOROVOD_RANK, ...).
std::vector<std::string> WorkerEnvironment(
    const std::vector<std::string>& base,
    const std::map<std::string, std::string>& overlay,
    const WorkerIdentity& id);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_ENVIRONMENT_H_
