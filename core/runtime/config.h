// The runtime's configuration: every HVD_* (or HOROVOD_*) variable, parsed
// once at init (the C ABI's hvd_init) into one Config. Everything below the C
// ABI takes its part of it as plain data (options structs); no library module
// reads the environment. A bad value fails init with one line naming the
// variable, its text and what it accepts.
#ifndef HVD_CORE_RUNTIME_CONFIG_H_
#define HVD_CORE_RUNTIME_CONFIG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/collectives/options.h"
#include "core/runtime/autotune_options.h"
#include "core/common/logging.h"
#include "core/transport/shm/shm_options.h"
#include "core/runtime/launch_contract.h"
#include "core/transport/tcp/tcp_options.h"

namespace hvd::runtime {

// HVD_GPU_DATA_PATH: how GPU tensors move (auto: NCCL where each rank has a
// GPU of its own, staged through host memory otherwise).
enum class GpuDataPath { kAuto, kNccl, kStaged };

// HVD_TRANSPORT: what carries CPU tensors between hosts (auto: TCP for now,
// until the RDMA transport is proven on hardware; rdma: RDMA or init fails;
// tcp: TCP). Within a host shared memory does, either way.
enum class Transport { kAuto, kRdma, kTcp };

struct Config {
  // Identity: set by hvdrun's agents or an orchestrator (HVD_RANK, ...). In
  // an elastic job, replaced at each init by the round's assignment.
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string hostname;
  std::string rendezvous_addr;  // empty: no rendezvous (size must be 1)
  std::string token;            // secret: never logged
  // TLS to the rendezvous: the CA's PEM (read from the file when
  // HVD_RENDEZVOUS_CA names one) and the server's name; empty: plaintext.
  std::string rendezvous_ca_pem;
  std::string rendezvous_tls_name;
  std::string iface;            // data-plane interface or address; empty: all
  // HVD_ELASTIC_WORKER_ID; empty: not an elastic job.
  std::string elastic_worker_id;
  bool elastic() const { return !elastic_worker_id.empty(); }
  // The round this init joined (not a variable: hvd_init sets it with the
  // round's identity); -1 outside elastic jobs.
  int elastic_round = -1;
  // Which hvd_init of this process this is, counted from 1 (not a variable:
  // hvd_init counts). Names this init's keys in the rendezvous store, and
  // tells a rank 0 that serves the rendezvous itself from the other ranks
  // still talking to the server of its last init.
  int init_count = 0;
  // Set when the tool that started this process gave its identity
  // (launch_contract.h) and no HVD_RENDEZVOUS_ADDR was given: its name; on
  // rank 0 whether it serves the rendezvous at rendezvous_addr's port; or
  // whether the address (and the job token) reach the ranks over PMIx.
  std::string launched_by;
  bool serve_rendezvous = false;
  bool rendezvous_over_pmix = false;
  // With launched_by and no HVD_JOB_TOKEN: what names this job, from which
  // every rank derives the same token with the user's secret
  // ($HOME/.hvd/secret).
  std::string job_id;
  std::string secret_file;
  // Rank -> host, where the launch contract says (LaunchContract::rank_hosts).
  std::vector<std::string> rank_hosts;

  // Negotiation and fusion.
  absl::Duration cycle_time = absl::Milliseconds(1);
  // While the whole job is idle the wait between cycles doubles each cycle
  // up to this (HVD_IDLE_CYCLE_TIME, ms); at or below cycle_time: no back-off.
  absl::Duration idle_cycle_time = absl::Milliseconds(20);
  // Children per rank in the tree negotiation travels
  // (HVD_NEGOTIATION_FANOUT; negotiation_tree.h): jobs of up to this many
  // ranks + 1 negotiate flat with rank 0.
  int negotiation_fanout = 64;
  int64_t fusion_threshold = int64_t{64} << 20;  // bytes; 0 disables fusion
  // Fused allreduces of at most this many bytes are copied into the fusion
  // buffer; larger ones are reduced where they lie (HVD_FUSION_IN_PLACE_BYTES).
  int64_t fusion_in_place_bytes = int64_t{64} << 10;
  int64_t cache_capacity = 1024;                 // 0 disables the cache
  std::string timeline_path;
  bool timeline_mark_cycles = false;
  absl::Duration stall_check_time = absl::Seconds(60);  // 0 disables
  absl::Duration stall_shutdown_time = absl::ZeroDuration();
  // Between this rank's metrics reports in the job's store (metrics.h);
  // 0: no reports (HVD_METRICS_INTERVAL, seconds; hvdrun --metrics-port
  // sets it).
  absl::Duration metrics_interval = absl::ZeroDuration();
  absl::Duration timeout = absl::Seconds(120);  // every data-plane wait
  absl::Duration start_timeout = absl::Seconds(60);
  // The background thread polls this long for more work after a busy cycle
  // (HVD_BACKGROUND_SPIN_US); hvd_wait polls a handle this long before it
  // sleeps (HVD_WAIT_SPIN_US).
  absl::Duration background_spin = absl::Microseconds(100);
  absl::Duration wait_spin = absl::ZeroDuration();
  // A cycle the background thread starts while a burst of submissions is
  // still arriving waits until none came for this long, at most
  // cycle_time (HVD_SUBMIT_SETTLE_US; 0: never waits): the burst is then
  // negotiated whole, and the submitting thread is not slowed by the
  // cycle's data moving on its core.
  absl::Duration submit_settle = absl::Microseconds(100);
  // A caller waiting for its own op runs the negotiation and the collective
  // on its own thread when no other cycle runs (HVD_CALLER_PROGRESS; off:
  // only the background thread does).
  bool caller_progress = true;
  // A cycle first tries to agree on a step of cached tensors by one
  // exchange among all ranks, instead of the gather through rank 0
  // (HVD_CACHED_EXCHANGE; off: every cycle is gathered). Every rank of a
  // job must have the same value.
  bool cached_exchange = true;
  // Set only when HVD_LOG_LEVEL is.
  std::optional<LogLevel> log_level;
  // Log lines without their timestamp (HVD_LOG_HIDE_TIME).
  bool log_hide_time = false;

  // The data plane. `collectives`: algorithm, chunk_bytes and the
  // small-message thresholds (HVD_ALLREDUCE_ALGORITHM, HVD_CHUNK_BYTES,
  // HVD_SMALL_MESSAGE_BYTES, HVD_CROSS_HOST_SMALL_MESSAGE_BYTES); the
  // runtime sets its timeout and hosts.
  collectives::CollectiveOptions collectives;
  bool shm = true;  // HVD_SHM: shared memory between ranks of one host
  transport::TcpTuning tcp;
  transport::ShmTuning shm_tuning;
  GpuDataPath gpu_data_path = GpuDataPath::kAuto;
  Transport transport = Transport::kAuto;
  // HVD_RDMA_PROVIDER: libfabric provider name (verbs, efa, tcp, ...);
  // empty: any that passes (rdma/fabric.h).
  std::string rdma_provider;
  bool hierarchical_allreduce = false;  // GPU: NCCL within hosts, CPU across

  // Rank 0 tunes the fusion threshold, cycle time, small-message threshold,
  // chunk size and hierarchical switches while the job runs (autotune.h).
  AutotuneOptions autotune;
};

// Looks a variable up by its bare name ("FUSION_THRESHOLD"), whichever
// spelling (HVD_/HOROVOD_) is set; nullopt when neither is.
using ConfigLookup =
    std::function<std::optional<std::string>(absl::string_view name)>;

// Parses every variable through `lookup`, and the variables of the tool
// that started the process through `env` (full names; launch_contract.h),
// which HVD_* ones override. A process with neither is a job of size 1.
// InvalidArgument naming the variable for a malformed, out-of-range or
// inconsistent value. An elastic worker needs HVD_RENDEZVOUS_ADDR but no
// identity: the identity variables are still parsed, but not checked
// against each other (each round replaces them).
absl::StatusOr<Config> ParseConfig(const ConfigLookup& lookup,
                                   const EnvLookup& env = nullptr);
// ParseConfig over this process's environment.
absl::StatusOr<Config> ConfigFromEnv();

// How long a rank waits for work before its next cycle when the last
// `idle_cycles` cycles in a row found the job idle (ResponseList.idle).
absl::Duration CycleTimeAfter(const Config& config, int idle_cycles);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_CONFIG_H_
