// Elastic jobs behind the C ABI: each init joins a round, and a watcher of
// the round aborts the runtime when the round ends and records the host
// updates the launcher announces.
#include <map>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/api_state.h"
#include "core/common/logging.h"

namespace hvd::api {
namespace {

struct HostUpdate {
  bool added = false;
  bool removed = false;
};

// What a round's watcher ends when the round ends: the members' connect,
// then their runtime.
struct RoundLink {
  const std::shared_ptr<Cancellation> connect =
      std::make_shared<Cancellation>();
  absl::Mutex mu;
  std::weak_ptr<runtime::Runtime> runtime ABSL_GUARDED_BY(mu);

  void End(int round, const std::string& reason) {
    connect->Cancel(absl::AbortedError(absl::StrCat(
        "elastic round ", round, " ended while connecting: ", reason)));
    absl::MutexLock lock(&mu);
    if (auto rt = runtime.lock()) rt->Abort(absl::AbortedError(reason));
  }
};

absl::Mutex g_elastic_mu;
bool g_enabled ABSL_GUARDED_BY(g_elastic_mu) = false;
int g_round ABSL_GUARDED_BY(g_elastic_mu) = -1;
std::unique_ptr<bootstrap::RoundWatcher> g_watcher
    ABSL_GUARDED_BY(g_elastic_mu);
std::shared_ptr<RoundLink> g_link ABSL_GUARDED_BY(g_elastic_mu);
// By update number: the launcher may announce one again in a later round.
std::map<int64_t, HostUpdate>& Updates()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_elastic_mu) {
  static auto* updates = new std::map<int64_t, HostUpdate>();
  return *updates;
}

void RecordHostUpdate(int64_t seq, bool added, bool removed) {
  absl::MutexLock lock(&g_elastic_mu);
  HostUpdate& update = Updates()[seq];
  update.added |= added;
  update.removed |= removed;
}

}  // namespace

absl::Status JoinElasticRound(runtime::Config* config) {
  int last_round;
  {
    absl::MutexLock lock(&g_elastic_mu);
    g_enabled = config->elastic();
    last_round = g_round;
  }
  if (!config->elastic()) return absl::OkStatus();
  absl::StatusOr<bootstrap::RoundAssignment> round =
      bootstrap::JoinRound(*config, last_round);
  if (!round.ok()) return round.status();
  {
    absl::MutexLock lock(&g_elastic_mu);
    g_round = round->round;
  }
  config->elastic_round = round->round;
  config->rank = round->rank;
  config->size = round->size;
  config->local_rank = round->local_rank;
  config->local_size = round->local_size;
  config->cross_rank = round->cross_rank;
  config->cross_size = round->cross_size;
  HVD_LOG(INFO) << "elastic worker " << config->elastic_worker_id
                << " joined round " << round->round << " as rank "
                << round->rank << " of " << round->size;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Cancellation>> WatchElasticRound(
    const runtime::Config& config) {
  if (!config.elastic()) return nullptr;
  auto link = std::make_shared<RoundLink>();
  bootstrap::RoundEvents events;
  events.on_abort = [link, round = config.elastic_round](
                        const std::string& reason) {
    link->End(round, reason);
  };
  events.on_hosts_updated = RecordHostUpdate;
  auto watcher = bootstrap::RoundWatcher::Start(config, config.elastic_round,
                                                std::move(events));
  if (!watcher.ok()) return watcher.status();
  absl::MutexLock lock(&g_elastic_mu);
  g_watcher = *std::move(watcher);
  g_link = link;
  return std::shared_ptr<const Cancellation>(link->connect);
}

void AttachElasticRuntime(const std::shared_ptr<runtime::Runtime>& runtime) {
  std::shared_ptr<RoundLink> link;
  {
    absl::MutexLock lock(&g_elastic_mu);
    link = g_link;
  }
  if (!link) return;
  absl::MutexLock lock(&link->mu);
  link->runtime = runtime;
  if (link->connect->cancelled()) {
    runtime->Abort(absl::AbortedError(link->connect->status().message()));
  }
}

absl::Status ElasticConnectError(const runtime::Config& config,
                                 const absl::Status& status) {
  if (!config.elastic() ||
      (!absl::IsDeadlineExceeded(status) && !absl::IsUnavailable(status))) {
    return status;
  }
  return absl::AbortedError(absl::StrCat("elastic round ", config.elastic_round,
                                         ": ", status.message()));
}

std::unique_ptr<bootstrap::RoundWatcher> TakeElasticWatcher() {
  absl::MutexLock lock(&g_elastic_mu);
  g_link.reset();
  return std::move(g_watcher);
}

}  // namespace hvd::api

extern "C" {

int hvd_elastic_enabled(void) {
  absl::MutexLock lock(&hvd::api::g_elastic_mu);
  return hvd::api::g_enabled ? 1 : 0;
}

int hvd_elastic_round(void) {
  absl::MutexLock lock(&hvd::api::g_elastic_mu);
  return hvd::api::g_round;
}

int hvd_elastic_host_updates(int64_t after_seq, int64_t* seq, int* added,
                             int* removed) {
  absl::MutexLock lock(&hvd::api::g_elastic_mu);
  const auto& updates = hvd::api::Updates();
  bool any_added = false, any_removed = false;
  for (auto it = updates.upper_bound(after_seq); it != updates.end(); ++it) {
    any_added |= it->second.added;
    any_removed |= it->second.removed;
  }
  if (seq != nullptr) *seq = updates.empty() ? 0 : updates.rbegin()->first;
  if (added != nullptr) *added = any_added ? 1 : 0;
  if (removed != nullptr) *removed = any_removed ? 1 : 0;
  return HVD_OK;
}

}  // extern "C"
