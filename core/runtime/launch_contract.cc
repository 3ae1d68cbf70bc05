#include "core/runtime/launch_contract.h"

#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/slurm_lists.h"

namespace hvd::runtime {
namespace {

// Reads the integer variables of one contract, keeping the first error.
class Vars {
 public:
  explicit Vars(const EnvLookup& env) : env_(env) {}

  bool Has(const char* name) const { return env_(name).has_value(); }
  std::optional<std::string> Text(const char* name) const {
    return env_(name);
  }

  // nullopt when unset or malformed (then status() says which).
  std::optional<int> Int(const char* name, int min = 0) {
    std::optional<std::string> text = env_(name);
    if (!text) return std::nullopt;
    int value = 0;
    if (!absl::SimpleAtoi(*text, &value) || value < min) {
      Fail(absl::InvalidArgumentError(
          absl::StrCat(name, "='", *text, "' is not valid: expected a whole "
                       "number of at least ", min)));
      return std::nullopt;
    }
    return value;
  }

  void Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  const absl::Status& status() const { return status_; }

 private:
  const EnvLookup& env_;
  absl::Status status_;
};

void OpenMpi(Vars& v, LaunchContract& c) {
  c.kind = ContractKind::kOpenMpi;
  c.name = "Open MPI";
  c.rank = v.Int("OMPI_COMM_WORLD_RANK");
  c.size = v.Int("OMPI_COMM_WORLD_SIZE", 1);
  c.local_rank = v.Int("OMPI_COMM_WORLD_LOCAL_RANK");
  c.local_size = v.Int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  c.cross_rank = v.Int("OMPI_COMM_WORLD_NODE_RANK");
  c.job_id = v.Text("OMPI_MCA_ess_base_jobid").value_or("");
  c.pmix = true;
}

void Torchrun(Vars& v, LaunchContract& c) {
  c.kind = ContractKind::kTorchrun;
  c.name = "torchrun";
  c.rank = v.Int("RANK");
  c.size = v.Int("WORLD_SIZE", 1);
  c.local_rank = v.Int("LOCAL_RANK");
  c.local_size = v.Int("LOCAL_WORLD_SIZE", 1);
  c.cross_rank = v.Int("GROUP_RANK");
  const std::optional<int> port = v.Int("MASTER_PORT", 1);
  c.rendezvous_host = v.Text("MASTER_ADDR").value_or("");
  if (port && *port < 65535) c.rendezvous_port = *port + 1;
  c.job_id = v.Text("TORCHELASTIC_RUN_ID")
                 .value_or(absl::StrCat(c.rendezvous_host, ":",
                                        port.value_or(0)));
  if (v.status().ok() && (c.rendezvous_host.empty() || !port)) {
    v.Fail(absl::InvalidArgumentError(
        "RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not: "
        "hvd's rendezvous is served by rank 0 at MASTER_ADDR, port "
        "MASTER_PORT + 1 (or set HVD_RENDEZVOUS_ADDR)"));
  }
}

// Rank -> node under Slurm's block distribution (the default: each node's
// tasks consecutive, nodes in list order); empty for any other layout, or
// when the counts do not add up to the step's tasks.
std::vector<std::string> BlockLayout(const std::vector<std::string>& nodes,
                                     const std::vector<int>& counts, int size,
                                     absl::string_view distribution) {
  std::vector<std::string> out;
  if (!absl::StartsWith(distribution, "block") ||
      nodes.size() != counts.size()) {
    return out;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    out.insert(out.end(), static_cast<size_t>(counts[n]), nodes[n]);
  }
  if (out.size() != static_cast<size_t>(size)) out.clear();
  return out;
}

void Slurm(Vars& v, LaunchContract& c) {
  c.kind = ContractKind::kSlurm;
  c.name = "Slurm";
  c.rank = v.Int("SLURM_PROCID");
  c.size = v.Int("SLURM_STEP_NUM_TASKS", 1);
  c.local_rank = v.Int("SLURM_LOCALID");
  c.cross_rank = v.Int("SLURM_NODEID");
  c.cross_size = v.Int("SLURM_STEP_NUM_NODES", 1);
  const std::optional<int> job = v.Int("SLURM_JOB_ID");
  const std::optional<int> step = v.Int("SLURM_STEP_ID");
  if (!v.status().ok()) return;
  std::vector<int> counts;
  if (auto per_node = v.Text("SLURM_STEP_TASKS_PER_NODE"); per_node) {
    absl::StatusOr<std::vector<int>> expanded =
        ExpandSlurmCounts(*per_node, "SLURM_STEP_TASKS_PER_NODE");
    if (!expanded.ok()) return v.Fail(expanded.status());
    counts = *std::move(expanded);
    const int node = c.cross_rank.value_or(0);
    if (node < 0 || static_cast<size_t>(node) >= counts.size()) {
      return v.Fail(absl::InvalidArgumentError(absl::StrCat(
          "SLURM_STEP_TASKS_PER_NODE='", *per_node, "' has no entry for node ",
          node, " (SLURM_NODEID)")));
    }
    c.local_size = counts[node];
  }
  auto nodelist = v.Text("SLURM_STEP_NODELIST");
  if (!nodelist || !job) {
    return v.Fail(absl::InvalidArgumentError(
        "SLURM_PROCID is set but SLURM_STEP_NODELIST or SLURM_JOB_ID is not: "
        "start the workers with srun"));
  }
  absl::StatusOr<std::vector<std::string>> nodes =
      ExpandSlurmHostList(*nodelist);
  if (!nodes.ok()) {
    return v.Fail(absl::InvalidArgumentError(
        absl::StrCat("SLURM_STEP_NODELIST: ", nodes.status().message())));
  }
  c.rendezvous_host = nodes->front();
  c.rank_hosts = BlockLayout(*nodes, counts, c.size.value_or(1),
                             v.Text("SLURM_DISTRIBUTION").value_or("block"));
  // Below Linux's ephemeral range; steps of one job apart.
  const uint64_t mix = uint64_t(*job) * 131 + uint64_t(step.value_or(0));
  c.rendezvous_port = 20000 + static_cast<int>(mix % 10000);
  c.job_id = absl::StrCat("slurm:", *job, ".", step.value_or(0));
}

void IndexedJob(Vars& v, LaunchContract& c) {
  c.kind = ContractKind::kIndexedJob;
  c.name = "Kubernetes indexed Job";
  c.rank = v.Int("JOB_COMPLETION_INDEX");
  c.rendezvous_host = v.Text("MASTER_ADDR").value_or("");
  if (std::optional<int> port = v.Int("MASTER_PORT", 1); port) {
    c.rendezvous_port = *port;
  }
  c.job_id = absl::StrCat("k8s:", c.rendezvous_host);
}

}  // namespace

absl::StatusOr<LaunchContract> DetectLaunchContract(const EnvLookup& env) {
  Vars v(env);
  LaunchContract c;
  if (v.Has("OMPI_COMM_WORLD_RANK")) {
    OpenMpi(v, c);
  } else if (v.Has("RANK") && v.Has("WORLD_SIZE")) {
    Torchrun(v, c);
  } else if (v.Has("SLURM_PROCID") && v.Has("SLURM_STEP_NUM_TASKS")) {
    Slurm(v, c);
  } else if (v.Has("JOB_COMPLETION_INDEX")) {
    IndexedJob(v, c);
  }
  if (!v.status().ok()) return v.status();
  if (c.rank && c.size && *c.rank >= *c.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.name, " gives rank ", *c.rank, " of ", *c.size,
        ": need 0 <= rank < size"));
  }
  return c;
}

}  // namespace hvd::runtime
