// Slurm's compressed lists, as its variables give them: host lists
// (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST) and counts per node
// (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE). Read by hvdrun in an
// allocation and by a worker srun started without it.
#ifndef HVD_CORE_COMMON_SLURM_LISTS_H_
#define HVD_CORE_COMMON_SLURM_LISTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hvd {

// Slurm's compressed host list: "node[01-04,07],gpu3,rack[1-2]-n[1-2]".
// Ranges keep the zero padding of their first bound; several bracket
// groups in one name expand left to right. InvalidArgument naming the bad
// part: an unbalanced or nested bracket, an empty name or range, a bound
// that is not a number, a range whose end is below its start, a name
// listed twice, more than 100000 names.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(
    absl::string_view list);

// Slurm's compressed counts per node: "4(x2),2" is {4, 4, 2}. Every count
// a positive integer. InvalidArgument naming `variable` and the bad entry.
absl::StatusOr<std::vector<int>> ExpandSlurmCounts(absl::string_view counts,
                                                   absl::string_view variable);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_SLURM_LISTS_H_
