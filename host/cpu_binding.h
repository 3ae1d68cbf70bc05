// Which CPUs each worker of a host runs on. hvdrun's agent binds the
// workers it starts to equal shares of the host's cores (hvdrun
// --bind-to cores, the default): each worker's threads (its framework's,
// hvd's) stay on its own cores, so the OS cannot pile two workers onto one
// core while another idles, and a thread pool sized by the CPUs a process
// may use (OpenMP's default, for one) starts that many, not one per core of
// the whole host in every worker.
#ifndef HVD_HOST_CPU_BINDING_H_
#define HVD_HOST_CPU_BINDING_H_

#include <sched.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hvd {
namespace host {

// Where Linux describes its CPUs.
inline constexpr char kCpuSysfs[] = "/sys/devices/system/cpu";

// One physical core: the hardware threads (CPUs) that share it.
struct CpuCore {
  int package = 0;
  int core = 0;
  std::vector<int> cpus;  // ascending
};

// The cores of the `allowed` CPUs, from the topology under `sysfs` (normally
// /sys/devices/system/cpu: cpuN/topology/physical_package_id and core_id),
// ordered by package, then core id. A CPU whose topology cannot be read is
// a core of its own.
std::vector<CpuCore> CoresOf(const std::vector<int>& allowed,
                             const std::string& sysfs);

// The CPUs worker `local_rank` of `local_size` on the host is bound to: a
// contiguous share of `cores`, whole cores, the first cores.size() %
// local_size workers one core more than the others. Empty (no binding) when
// the host has fewer cores than workers, or the rank is out of range.
std::vector<int> CpuShare(const std::vector<CpuCore>& cores, int local_rank,
                          int local_size);

// The CPUs this process may run on (its affinity: a cpuset of a container or
// a Slurm step narrows it). Empty if it cannot be read.
std::vector<int> AllowedCpus();

// `cpus` as the kernel's affinity mask (for sched_setaffinity);
// InvalidArgument naming a CPU out of the mask's range.
absl::StatusOr<cpu_set_t> CpuSetOf(const std::vector<int>& cpus);

// The kernel's list form: "0-3,8,10-11".
std::string CpuListString(const std::vector<int>& cpus);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_CPU_BINDING_H_
