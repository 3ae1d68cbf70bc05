// The environment a worker starts with: the agent's own, the job's overlay,
// and the identity variables (HVD_RANK, ...) in both spellings.
#ifndef HVD_HOST_WORKER_ENVIRONMENT_H_
#define HVD_HOST_WORKER_ENVIRONMENT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace hvd {
namespace host {

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
  // TLS to the rendezvous (HVD_RENDEZVOUS_CA, HVD_RENDEZVOUS_TLS_NAME);
  // empty: not set.
  std::string rendezvous_ca_pem;
  std::string rendezvous_tls_name;
  std::string iface;  // HVD_IFACE; empty: not set
  // HVD_ELASTIC_WORKER_ID in an elastic job; empty: not set.
  std::string elastic_worker_id;
};

// Whether `name` is one of hvd's per-worker identity variables, in either
// spelling (HVD_RANK, HOROVOD_RANK, ...).
bool IsIdentityVariable(absl::string_view name);

// Sets HVD_<name> and HOROVOD_<name> to `value` in `env`.
void SetBothSpellings(std::map<std::string, std::string>& env,
                      absl::string_view name, const std::string& value);

// A worker's whole environment, "NAME=VALUE" entries: `base` (the agent's
// own environment), with `overlay` on top, then the identity variables in
// both spellings (HVD_RANK and HOROVOD_RANK, ...). Identity variables in
// `base` or `overlay` never survive (a nested launch's HVD_IFACE).
std::vector<std::string> WorkerEnvironment(
    const std::vector<std::string>& base,
    const std::map<std::string, std::string>& overlay,
    const WorkerIdentity& id);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_WORKER_ENVIRONMENT_H_
