// Lifecycle, topology, handles, process sets and timeline of the C ABI.
#include "core/c_api.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "core/api_state.h"
#include "core/bootstrap/connect.h"
#include "core/bootstrap/self_rendezvous.h"
#include "core/common/logging.h"
#include "core/common/version.h"
#include "core/dlpack_tensor.h"
#include "core/gpu/backend_factory.h"
#include "core/gpu/gpu_info.h"
#include "rdma/fabric.h"

namespace hvd::api {
namespace {

absl::Mutex g_mu;
std::shared_ptr<runtime::Runtime> g_runtime ABSL_GUARDED_BY(g_mu);
// Rank 0's rendezvous in a job hvdrun did not start; null otherwise.
std::unique_ptr<bootstrap::SelfRendezvous> g_self_rendezvous
    ABSL_GUARDED_BY(g_mu);
int g_inits ABSL_GUARDED_BY(g_mu) = 0;  // hvd_init calls that read a Config
bootstrap::PmixRecord g_pmix_record ABSL_GUARDED_BY(g_mu);
absl::Mutex g_names_mu;
std::map<std::pair<std::string, int>, int64_t>& NameCounters() {
  static auto* counters = new std::map<std::pair<std::string, int>, int64_t>();
  return *counters;
}
thread_local std::string t_last_error;
thread_local int t_last_error_code = 0;

}  // namespace

runtime::HandleTable& Handles() {
  static auto* table = new runtime::HandleTable();
  return *table;
}

std::shared_ptr<runtime::Runtime> Current() {
  absl::MutexLock lock(&g_mu);
  return g_runtime;
}

int SetLastError(const absl::Status& status) {
  t_last_error = std::string(status.message());
  t_last_error_code = static_cast<int>(status.code());
  return HVD_ERROR;
}

std::string GeneratedName(const char* op, int process_set) {
  int64_t n;
  {
    absl::MutexLock lock(&g_names_mu);
    n = NameCounters()[{op, process_set}]++;
  }
  if (process_set == 0) return absl::StrCat(op, ".noname.", n);
  return absl::StrCat(op, ".noname.set", process_set, ".", n);
}

void ForgetGeneratedNames(int process_set) {
  absl::MutexLock lock(&g_names_mu);
  std::erase_if(NameCounters(), [process_set](const auto& counter) {
    return counter.first.second == process_set;
  });
}

void ResetGeneratedNames() {
  absl::MutexLock lock(&g_names_mu);
  NameCounters().clear();
}

namespace {

int Topology(int runtime::Config::*field) {
  auto rt = Current();
  return rt ? rt->config().*field : -1;
}

}  // namespace
}  // namespace hvd::api

using hvd::api::Current;
using hvd::api::Handles;

extern "C" {

int hvd_init(void) {
  // Debian's abseil is built without NDEBUG, so each absl::Mutex lock also
  // updates a lock-order graph for deadlock detection: 2-3% of a rank's CPU
  // in a small-allreduce loop. hvd's locks are checked by the compiler
  // (-Wthread-safety) and under ThreadSanitizer in its tests instead. Set
  // before hvd's first lock, once per process.
  static const bool no_deadlock_graph = [] {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    return true;
  }();
  (void)no_deadlock_graph;
  absl::MutexLock lock(&hvd::api::g_mu);
  if (hvd::api::g_runtime) return HVD_OK;
  // The one place the environment is read: the rest gets its part of the
  // Config.
  auto config = hvd::runtime::ConfigFromEnv();
  if (!config.ok()) return hvd::api::SetLastError(config.status());
  config->init_count = ++hvd::api::g_inits;
  if (config->log_level) hvd::SetLogLevel(*config->log_level);
  hvd::SetLogTime(!config->log_hide_time);
  Handles().SetWaitSpin(config->wait_spin);
  hvd::api::ResetGeneratedNames();
  // An elastic worker's identity is the round's.
  if (absl::Status s = hvd::api::JoinElasticRound(&*config); !s.ok()) {
    return hvd::api::SetLastError(s);
  }
  // A job srun, torchrun or mpirun started meets at rank 0's rendezvous.
  auto self_rendezvous = hvd::bootstrap::SelfRendezvous::Prepare(
      &*config, &hvd::api::g_pmix_record);
  if (!self_rendezvous.ok()) {
    return hvd::api::SetLastError(self_rendezvous.status());
  }
  // Watched from before the connect: a member lost meanwhile ends the
  // round, and the connect with it.
  auto round_cancel = hvd::api::WatchElasticRound(*config);
  if (!round_cancel.ok()) return hvd::api::SetLastError(round_cancel.status());
  auto parts = hvd::bootstrap::ConnectJob(*config, *round_cancel);
  if (!parts.ok()) {
    hvd::api::TakeElasticWatcher().reset();
    absl::Status error = parts.status();
    if (*self_rendezvous) error = (*self_rendezvous)->Explain(error, config->size);
    return hvd::api::SetLastError(
        hvd::api::ElasticConnectError(*config, error));
  }
  auto started = hvd::runtime::Runtime::Start(
      *config, *std::move(parts), &Handles(), hvd::gpu::BackendFactory());
  if (!started.ok()) {
    hvd::api::TakeElasticWatcher().reset();
    return hvd::api::SetLastError(started.status());
  }
  std::shared_ptr<hvd::runtime::Runtime> rt = std::move(*started);
  hvd::api::AttachElasticRuntime(rt);
  hvd::api::g_runtime = std::move(rt);
  hvd::api::g_self_rendezvous = *std::move(self_rendezvous);
  return HVD_OK;
}

int hvd_shutdown(void) {
  std::shared_ptr<hvd::runtime::Runtime> rt;
  std::unique_ptr<hvd::bootstrap::RoundWatcher> watcher;
  std::unique_ptr<hvd::bootstrap::SelfRendezvous> self_rendezvous;
  {
    absl::MutexLock lock(&hvd::api::g_mu);
    rt = std::move(hvd::api::g_runtime);
    watcher = hvd::api::TakeElasticWatcher();
    self_rendezvous = std::move(hvd::api::g_self_rendezvous);
  }
  // The watcher outlives the runtime's shutdown: a round that ends
  // meanwhile (a peer lost) still cuts a stop negotiation short.
  if (rt) rt->Shutdown();
  watcher.reset();
  self_rendezvous.reset();
  return HVD_OK;
}

int hvd_is_initialized(void) { return Current() != nullptr; }

int hvd_has_ended(void) {
  auto runtime = Current();
  return runtime != nullptr && runtime->Ended();
}

const char* hvd_last_error(void) { return hvd::api::t_last_error.c_str(); }
int hvd_last_error_code(void) { return hvd::api::t_last_error_code; }

const char* hvd_version(void) { return hvd::kVersion; }

int hvd_rank(void) { return hvd::api::Topology(&hvd::runtime::Config::rank); }
int hvd_size(void) { return hvd::api::Topology(&hvd::runtime::Config::size); }
int hvd_local_rank(void) {
  return hvd::api::Topology(&hvd::runtime::Config::local_rank);
}
int hvd_local_size(void) {
  return hvd::api::Topology(&hvd::runtime::Config::local_size);
}
int hvd_cross_rank(void) {
  return hvd::api::Topology(&hvd::runtime::Config::cross_rank);
}
int hvd_cross_size(void) {
  return hvd::api::Topology(&hvd::runtime::Config::cross_size);
}

int hvd_is_homogeneous(void) {
  auto rt = Current();
  if (!rt) return -1;
  const auto& c = rt->config();
  return c.local_size * c.cross_size == c.size ? 1 : 0;
}

int hvd_nccl_built(void) { return hvd::gpu::NcclVersionCode(); }
int hvd_cuda_built(void) { return hvd::gpu::CudaBuilt() ? 1 : 0; }
int hvd_mpi_built(void) { return 0; }
int hvd_gloo_built(void) { return 0; }

const char* hvd_gpu_description(void) {
  static thread_local std::string text;
  text = hvd::gpu::Describe();
  return text.c_str();
}

const char* hvd_rdma_providers(void) {
  static thread_local std::string text;
  text = absl::StrJoin(hvd::rdma::UsableProviders(), ",");
  return text.c_str();
}

int hvd_poll(hvd_handle handle) {
  const int state = Handles().Poll(handle);
  return state < 0 ? HVD_INVALID_HANDLE : state;
}

int hvd_wait(hvd_handle handle, double timeout_seconds) {
  // Over already: no clock, no cycle, one lookup.
  if (const std::optional<bool> ok = Handles().DoneOk(handle)) {
    return *ok ? HVD_OK : HVD_ERROR;
  }
  const absl::Duration timeout =
      timeout_seconds < 0 || std::isinf(timeout_seconds)
          ? absl::InfiniteDuration()
          : absl::Seconds(timeout_seconds);
  // The caller runs the cycles that complete its op itself, where it may;
  // driving and waiting share the one timeout.
  const absl::Time deadline = absl::Now() + timeout;  // infinite stays so
  if (auto runtime = Current()) {
    runtime->Drive(handle, deadline);
  }
  switch (Handles().Wait(handle, deadline)) {
    case hvd::runtime::HandleTable::kInvalid:
      return HVD_INVALID_HANDLE;
    case hvd::runtime::HandleTable::kTimeout:
      return HVD_TIMEOUT;
    case hvd::runtime::HandleTable::kDone:
      break;
  }
  return Handles().GetStatus(handle).ok() ? HVD_OK : HVD_ERROR;
}

const char* hvd_handle_error(hvd_handle handle) {
  const char* text = Handles().ErrorText(handle);
  return text == nullptr ? "" : text;
}

int hvd_handle_error_code(hvd_handle handle) {
  return static_cast<int>(Handles().GetStatus(handle).code());
}

int hvd_handle_output_count(hvd_handle handle) {
  return Handles().OutputCount(handle);
}

DLManagedTensor* hvd_handle_output(hvd_handle handle, int32_t index) {
  hvd::runtime::OpResult result;
  if (!Handles().TakeResult(handle, index, &result) || !result.output) {
    return nullptr;
  }
  return hvd::ExportOutput(std::move(result));
}

DLManagedTensor* hvd_empty_like(const DLTensor* like) {
  absl::StatusOr<DLManagedTensor*> tensor;
  try {
    tensor = hvd::NewHostTensorLike(like);
  } catch (const std::bad_alloc&) {
    tensor = absl::ResourceExhaustedError("hvd_empty_like: out of memory");
  }
  if (!tensor.ok()) {
    hvd::api::SetLastError(tensor.status());
    return nullptr;
  }
  return *tensor;
}

int hvd_handle_splits(hvd_handle handle, int32_t index, int64_t* splits,
                      int32_t capacity) {
  hvd::runtime::OpResult result;
  if (!Handles().PeekResult(handle, index, &result)) return -1;
  const int n = static_cast<int>(result.received_splits.size());
  for (int i = 0; i < n && i < capacity; ++i) splits[i] = result.received_splits[i];
  return n;
}

int64_t hvd_handle_result(hvd_handle handle) {
  hvd::runtime::OpResult result;
  if (!Handles().PeekResult(handle, 0, &result)) return -1;
  return result.value;
}

void hvd_release(hvd_handle handle) { Handles().Release(handle); }

int hvd_process_set_rank(int32_t id) {
  auto rt = Current();
  return rt ? rt->process_sets().IndexOf(id, rt->config().rank) : -1;
}

int hvd_process_set_size(int32_t id) {
  auto rt = Current();
  if (!rt) return -1;
  auto ranks = rt->process_sets().Ranks(id);
  return ranks ? static_cast<int>(ranks->size()) : -1;
}

int hvd_process_set_ranks(int32_t id, int32_t* ranks, int32_t capacity) {
  auto rt = Current();
  if (!rt) return -1;
  auto members = rt->process_sets().Ranks(id);
  if (!members) return -1;
  for (int i = 0; i < capacity && i < static_cast<int>(members->size()); ++i) {
    ranks[i] = (*members)[i];
  }
  return static_cast<int>(members->size());
}

int hvd_process_set_ids(int32_t* ids, int32_t capacity) {
  auto rt = Current();
  if (!rt) return -1;
  const std::vector<int> all = rt->process_sets().Ids();
  for (int i = 0; i < capacity && i < static_cast<int>(all.size()); ++i) {
    ids[i] = all[i];
  }
  return static_cast<int>(all.size());
}

int hvd_start_timeline(const char* path, int mark_cycles) {
  auto rt = Current();
  if (!rt) {
    return hvd::api::SetLastError(absl::FailedPreconditionError(
        "hvd is not initialized: call hvd.init() first"));
  }
  if (rt->config().rank != 0) return HVD_OK;
  absl::Status s = rt->timeline().Start(path == nullptr ? "" : path,
                                        mark_cycles != 0);
  return s.ok() ? HVD_OK : hvd::api::SetLastError(s);
}

int hvd_stop_timeline(void) {
  if (auto rt = Current()) rt->timeline().Stop();
  return HVD_OK;
}

int hvd_metrics_step(void) {
  if (auto rt = Current()) rt->metrics().Step(absl::Now());
  return HVD_OK;
}

}  // extern "C"
