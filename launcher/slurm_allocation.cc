#include "launcher/slurm_allocation.h"

#include <iterator>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/slurm_lists.h"

namespace hvd {
namespace launcher {
namespace {

std::map<std::string, std::string> AsMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& kv : env) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) {
      out.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  return out;
}

// The value of the first of `names` that is set and not empty.
std::string First(const std::map<std::string, std::string>& env,
                  std::initializer_list<const char*> names,
                  std::string* which) {
  for (const char* n : names) {
    auto it = env.find(n);
    if (it != env.end() && !it->second.empty()) {
      *which = n;
      return it->second;
    }
  }
  return "";
}

// Task slots per node. Outside a job step SLURM_TASKS_PER_NODE says it; in
// one (hvdrun started by srun, or salloc's interactive step) that variable
// counts the step's tasks, so the job's CPUs per node, over the CPUs per
// task, stand in.
absl::StatusOr<std::vector<int>> SlotsPerNode(
    const std::map<std::string, std::string>& env, std::string* source) {
  std::string which;
  const bool in_step =
      !First(env, {"SLURM_STEP_ID", "SLURM_STEPID"}, &which).empty();
  const std::string tasks = First(env, {"SLURM_TASKS_PER_NODE"}, &which);
  if (!in_step && !tasks.empty()) {
    *source = absl::StrCat("SLURM_TASKS_PER_NODE=", tasks);
    return ExpandSlurmCounts(tasks, "SLURM_TASKS_PER_NODE");
  }
  const std::string cpus = First(env, {"SLURM_JOB_CPUS_PER_NODE"}, &which);
  if (cpus.empty()) {
    return absl::InvalidArgumentError(
        in_step ? "in a Slurm job step, but SLURM_JOB_CPUS_PER_NODE is not set"
                : "in a Slurm allocation, but neither SLURM_TASKS_PER_NODE "
                  "nor SLURM_JOB_CPUS_PER_NODE is set");
  }
  absl::StatusOr<std::vector<int>> counts =
      ExpandSlurmCounts(cpus, "SLURM_JOB_CPUS_PER_NODE");
  if (!counts.ok()) return counts.status();
  *source = absl::StrCat("SLURM_JOB_CPUS_PER_NODE=", cpus);
  const std::string per_task = First(env, {"SLURM_CPUS_PER_TASK"}, &which);
  int cpt = 1;
  if (!per_task.empty()) {
    if (!absl::SimpleAtoi(per_task, &cpt) || cpt <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SLURM_CPUS_PER_TASK: '", per_task, "' is not a positive integer"));
    }
    absl::StrAppend(source, " / SLURM_CPUS_PER_TASK=", cpt);
  }
  // Slurm gives no node fewer CPUs than one task needs.
  for (int& c : *counts) c = std::max(1, c / cpt);
  return counts;
}

// srun's input variables (srun(1)) that the agents' srun command line does
// not set itself and that would change their steps.
// clang-format off
constexpr const char* kStepShaping[] = {
    "SLURM_CPU_BIND", "SRUN_CPUS_PER_TASK", "SLURM_CPUS_PER_GPU",
    "SLURM_DISTRIBUTION", "SLURM_DIST_PLANESIZE", "SLURM_EXACT",
    "SLURM_EXCLUSIVE", "SLURM_EXPORT_ENV", "SRUN_EXPORT_ENV", "SLURM_GPU_BIND",
    "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_SOCKET",
    "SLURM_GPUS_PER_TASK", "SLURM_GRES", "SLURM_STEP_GRES",
    "SLURM_TRES_PER_TASK", "SLURM_HINT", "SLURM_MEM_BIND",
    "SLURM_NTASKS_PER_CORE", "SLURM_NTASKS_PER_GPU", "SLURM_NTASKS_PER_SOCKET",
    "SLURM_OVERCOMMIT", "SLURM_SPREAD_JOB", "SLURM_THREADS_PER_CORE",
    "SLURM_CORE_SPEC", "SLURM_THREAD_SPEC", "SLURM_LABELIO", "SLURM_STDINMODE",
    "SLURM_STDOUTMODE", "SLURM_STDERRMODE", "SLURM_UNBUFFEREDIO",
    "SLURM_OPEN_MODE", "SLURM_TIMELIMIT", "SLURM_WORKING_DIR",
    "SLURM_KILL_BAD_EXIT", "SLURM_WAIT",
};
// clang-format on

}  // namespace

absl::StatusOr<std::optional<SlurmAllocation>> ReadSlurmAllocation(
    const std::vector<std::string>& environment) {
  const std::map<std::string, std::string> env = AsMap(environment);
  std::string which;
  SlurmAllocation a;
  a.job_id = First(env, {"SLURM_JOB_ID", "SLURM_JOBID"}, &which);
  if (a.job_id.empty()) return std::nullopt;
  const std::string list =
      First(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}, &which);
  if (list.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SLURM_JOB_ID is set (", a.job_id, ") but SLURM_JOB_NODELIST is not"));
  }
  const std::string list_var = which;
  absl::StatusOr<std::vector<std::string>> nodes = ExpandSlurmHostList(list);
  if (!nodes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(list_var, ": ", nodes.status().message()));
  }
  std::string slots_source;
  absl::StatusOr<std::vector<int>> slots = SlotsPerNode(env, &slots_source);
  if (!slots.ok()) return slots.status();
  a.source = absl::StrCat(list_var, "=", list, ", ", slots_source);
  if (slots->size() != nodes->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Slurm's variables disagree: ", nodes->size(), " nodes but ",
        slots->size(), " slot counts (", a.source, ")"));
  }
  for (size_t i = 0; i < nodes->size(); ++i) {
    a.nodes.push_back(HostSlots{(*nodes)[i], (*slots)[i]});
  }
  return a;
}

absl::Status ApplySlurmAllocation(const std::vector<std::string>& env,
                                  Options* o) {
  if (o->rendezvous_only || !o->hosts.empty() || !o->hostfile.empty() ||
      IsElastic(*o)) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<SlurmAllocation>> a = ReadSlurmAllocation(env);
  if (!a.ok()) return a.status();
  if (!a->has_value()) return absl::OkStatus();
  int slots = 0;
  for (const HostSlots& h : (*a)->nodes) slots += h.slots;
  if (o->num_proc.has_value() && *o->num_proc > slots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-np ", *o->num_proc, " is more than the ", slots,
        " task slots of Slurm job ", (*a)->job_id, " (", (*a)->source, ")"));
  }
  o->slurm = *std::move(*a);
  return absl::OkStatus();
}

std::vector<std::string> SrunEnvironment(const std::vector<std::string>& env) {
  const std::set<std::string> step_shaping(std::begin(kStepShaping),
                                            std::end(kStepShaping));
  std::vector<std::string> out;
  for (const std::string& kv : env) {
    if (!step_shaping.count(kv.substr(0, kv.find('=')))) out.push_back(kv);
  }
  return out;
}

void DropPerNodeSlurmVariables(const std::vector<std::string>& x,
                               std::map<std::string, std::string>* forwarded) {
  static const std::set<std::string> kGpuLists = {
      "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
      "ZE_AFFINITY_MASK"};
  std::set<std::string> named;
  for (const std::string& e : x) named.insert(e.substr(0, e.find('=')));
  for (auto it = forwarded->begin(); it != forwarded->end();) {
    const std::string& name = it->first;
    const bool per_node = absl::StartsWith(name, "SLURM_") ||
                          absl::StartsWith(name, "SLURMD_") ||
                          kGpuLists.count(name) > 0;
    it = per_node && !named.count(name) ? forwarded->erase(it) : std::next(it);
  }
}

}  // namespace launcher
}  // namespace hvd
