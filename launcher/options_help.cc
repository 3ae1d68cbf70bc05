// hvdrun --help.
#include "absl/strings/str_cat.h"
#include "launcher/environment.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {
namespace {

// hvdrun --help, around the list of variables workers do not inherit.
constexpr char kHelpBeforeExcluded[] =
    "usage: hvdrun [flags] command [args...]\n"
    "       hvdrun --rendezvous-only -np N [--port P] [--rendezvous-file F]"
    " [command...]\n"
    "\n"
    "Runs `command` as N processes of one hvd job. Flags end at the first\n"
    "argument that is not a flag (or at --); the rest is the command, run\n"
    "in the current directory on every host.\n"
    "\n"
    "Job:\n"
    "  -np, --num-proc N          number of processes (default: all slots)\n"
    "  -H, --hosts h1:4,h2:4      hosts and their slots (no :N = 1 slot);\n"
    "                             default localhost:N\n"
    "  --hostfile F               lines 'host slots=N' or 'host:N'; #"
    " comments\n"
    "  -x, --env NAME[=VALUE]     forward NAME (even if excluded below), or"
    " set it\n"
    "  --output-filename DIR      also write DIR/rank.<r>/stdout and"
    " stderr\n"
    "  --prefix-output-with-timestamp  start each output line with the"
    " time\n"
    "  --config-file F            horovodrun's YAML file of tunables (flags"
    " win)\n"
    "  --start-timeout S          agents and workers must start within S"
    " seconds (30)\n"
    "  --kill-grace-seconds S     SIGTERM to SIGKILL delay on shutdown (5)\n"
    "  --verbose                  say what hvdrun does\n"
    "  --log-level L              HVD_LOG_LEVEL of workers (trace..fatal)\n"
    "  --transport T              HVD_TRANSPORT of workers between hosts: auto"
    "\n"
    "                             (TCP for now), rdma (libfabric) or tcp\n"
    "  --tcp                      --transport tcp, and NCCL_IB_DISABLE=1\n"
    "  -cb, --check-build         what this build and machine offer"
    " (frameworks,\n"
    "                             transports, NCCL/GPU): python3 -m"
    " hvd.check_build\n"
    "  --version, -h/--help\n"
    "\n"
    "Remote hosts (ssh, BatchMode):\n"
    "  -p, --ssh-port P           ssh port\n"
    "  -i, --ssh-identity-file F  ssh private key\n"
    "  --ssh-config-file F        ssh -F F\n"
    "  --agent-path PATH          hvd-agent on the hosts (default: hvd-agent"
    " on the\n"
    "                             remote PATH; $HVD_AGENT_PATH)\n"
    "  --network-interfaces a,b   interfaces for the data plane and the\n"
    "                             rendezvous; default: addresses every other"
    " host\n"
    "                             can reach, probed at start-up\n"
    "\n"
    "Tunables (become the workers' HVD_* variables):\n"
    "  --fusion-threshold-mb MB   HVD_FUSION_THRESHOLD (bytes)\n"
    "  --cycle-time-ms MS         HVD_CYCLE_TIME\n"
    "  --cache-capacity N         HVD_CACHE_CAPACITY\n"
    "  --timeline-filename F      HVD_TIMELINE\n"
    "  --[no-]timeline-mark-cycles  HVD_TIMELINE_MARK_CYCLES\n"
    "  --no-stall-check           HVD_STALL_CHECK_DISABLE=1 (--stall-check:"
    " 0)\n"
    "  --[no-]hierarchical-allreduce  HVD_HIERARCHICAL_ALLREDUCE (GPU"
    " tensors)\n"
    "  --[no-]hierarchical-allgather  HVD_HIERARCHICAL_ALLGATHER (rings"
    " across,\n"
    "                             then within hosts; on unless --no-)\n"
    "  --gloo-timeout-seconds S   HVD_TIMEOUT_SECONDS (every data-plane"
    " wait)\n"
    "  --log-without-timestamp    HVD_LOG_HIDE_TIME=1 (--log-with-timestamp:"
    " 0)\n"
    "  --stall-check-warning-time-seconds S   HVD_STALL_CHECK_TIME_SECONDS\n"
    "  --stall-check-shutdown-time-seconds S  "
    "HVD_STALL_SHUTDOWN_TIME_SECONDS\n"
    "\n"
    "horovodrun's other flags are accepted; those that mean nothing here\n"
    "(--gloo, --mpi, --autotune*, --mpi-args, ...) print a note saying why.\n"
    "Elastic jobs (--min-np, --host-discovery-script) are refused for now.\n"
    "\n"
    "Orchestrator mode (Kubernetes, Slurm):\n"
    "  --rendezvous-only          run only the rendezvous server; start\n"
    "                             `hvd-agent --rendezvous ADDR --slots K` on"
    " each node\n"
    "  --port P                   its port (default: any free port)\n"
    "  --rendezvous-file F        write address and token to F (mode 0600)\n"
    "                             instead of printing them\n"
    "\n"
    "Environment: workers get hvdrun's environment, except variables that\n"
    "belong to one host or session: ";
constexpr char kHelpAfterExcluded[] =
    ".\n"
    "Exit code: 0 if every worker exits 0; else the first failing worker's\n"
    "code (128+S for signal S); 1 for a start-up failure; 2 for bad input.\n";

}  // namespace

std::string HelpText() {
  return absl::StrCat(kHelpBeforeExcluded, ExcludedVariablesDescription(),
                      kHelpAfterExcluded);
}

}  // namespace launcher
}  // namespace hvd
