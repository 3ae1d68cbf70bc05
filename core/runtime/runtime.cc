#include "core/runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/thread_role.h"

namespace hvd::runtime {
namespace {

// A peer of a live job sends at least every HVD_IDLE_CYCLE_TIME, so a wait
// past the stall check time is a stopped or stuck peer: it is named then,
// and the wait ends at the stall shutdown time if one is set.
transport::WaitLimits WaitLimitsOf(const Config& config) {
  transport::WaitLimits limits{config.timeout, config.stall_check_time};
  if (config.stall_shutdown_time > absl::ZeroDuration()) {
    limits.timeout = std::min(limits.timeout, config.stall_shutdown_time);
  }
  return limits;
}

// The values in force at init of the knobs the autotuner tunes.
Tuning TuningOf(const Config& config) {
  Tuning t;
  t.set_fusion_threshold(config.fusion_threshold);
  t.set_cycle_time_us(absl::ToInt64Microseconds(config.cycle_time));
  t.set_small_message_bytes(
      static_cast<int64_t>(config.collectives.small_message_bytes));
  t.set_chunk_bytes(static_cast<int64_t>(config.collectives.chunk_bytes));
  t.set_hierarchical_allreduce(config.collectives.hierarchical_allreduce);
  t.set_hierarchical_allgather(config.collectives.hierarchical_allgather);
  return t;
}

// Whether the hierarchical algorithms can apply: several hosts (`hosts`:
// each rank's host), several ranks on one of them.
bool SeveralRanksOnSeveralHosts(const std::vector<int>& hosts) {
  std::map<int, int> ranks_on;
  for (int h : hosts) ++ranks_on[h];
  return ranks_on.size() > 1 &&
         std::any_of(ranks_on.begin(), ranks_on.end(),
                     [](const auto& host) { return host.second > 1; });
}

}  // namespace

Runtime::Runtime(const Config& config, RuntimeParts parts,
                 HandleTable* handles)
    : config_(config),
      wait_limits_(WaitLimitsOf(config)),
      parts_(std::move(parts)),
      handles_(handles),
      sets_(config.size),
      cache_(static_cast<int>(config.cache_capacity)),
      cycle_start_(absl::Now()) {}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Start(
    const Config& config, RuntimeParts parts, HandleTable* handles,
    DeviceOpsFactory device_factory) {
  if (config.size > 1 &&
      (!parts.context || parts.context->size() != config.size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", config.rank, ": the runtime needs a data plane of size ",
        config.size));
  }
  SetLogRank(config.rank);
  std::unique_ptr<Runtime> runtime(
      new Runtime(config, std::move(parts), handles));
  if (config.rank == 0 && !config.timeline_path.empty()) {
    if (absl::Status s = runtime->timeline_.Start(config.timeline_path,
                                                  config.timeline_mark_cycles);
        !s.ok()) {
      return s;
    }
  }
  if (config.rank == 0) {
    CoordinatorOptions options;
    options.size = config.size;
    options.fusion_threshold = config.fusion_threshold;
    options.stall_check_time = config.stall_check_time;
    options.stall_shutdown_time = config.stall_shutdown_time;
    runtime->coordinator_ = std::make_unique<Coordinator>(
        options, &runtime->sets_, &runtime->cache_, &runtime->timeline_);
    if (config.autotune.enabled && config.size > 1) {
      auto tuner = Autotuner::Create(
          config.autotune, TuningOf(config), config.size,
          SeveralRanksOnSeveralHosts(runtime->parts_.hosts));
      if (!tuner.ok()) return tuner.status();
      runtime->autotuner_ = *std::move(tuner);
    }
  }
  ExecutorOptions options;
  options.collectives = config.collectives;
  options.collectives.timeout = runtime->wait_limits_.timeout;
  options.collectives.stall_warning = runtime->wait_limits_.stall_warning;
  options.collectives.hosts = runtime->parts_.hosts;
  options.fusion_in_place_bytes =
      static_cast<size_t>(config.fusion_in_place_bytes);
  options.fusion_threshold_bytes =
      static_cast<size_t>(config.fusion_threshold);
  if (device_factory) {
    DeviceEnv env;
    env.config = config;
    env.store = runtime->parts_.store.get();
    env.make_context = runtime->parts_.make_context;
    env.collective_options = options.collectives;
    auto device = device_factory(env);
    if (!device.ok()) return device.status();
    runtime->device_ops_ = std::move(*device);
  }
  runtime->executor_ = std::make_unique<Executor>(
      config.rank, runtime->parts_.context.get(), &runtime->sets_,
      &runtime->cache_, &runtime->timeline_, options,
      runtime->device_ops_.get(),
      runtime->Reports() ? &runtime->metrics_ : nullptr);
  runtime->thread_ = std::thread([r = runtime.get()] {
    NameThisThread("hvd-background");
    r->Loop();
  });
  if (runtime->Reports()) {
    runtime->reporter_ = std::thread([r = runtime.get()] {
      NameThisThread("hvd-metrics");
      r->Report();
    });
  }
  HVD_LOG(INFO) << "initialized: rank " << config.rank << " of "
                << config.size << " on " << config.hostname;
  return runtime;
}

Runtime::~Runtime() { Shutdown(); }

absl::StatusOr<int64_t> Runtime::Submit(
    std::vector<std::unique_ptr<TensorEntry>> entries) {
  // Reserve every name first: a refused call queues nothing.
  {
    absl::MutexLock lock(&names_mu_);
    absl::InlinedVector<TensorKeyView, 1> keys;
    for (const auto& entry : entries) {
      if (entry->request.type() == JOIN) continue;
      const TensorKeyView key(entry->request.process_set(),
                              entry->request.name());
      if (in_flight_.contains(key) ||
          std::find(keys.begin(), keys.end(), key) != keys.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("an operation named '", std::string(key.second),
                         "' is still in flight on rank ", config_.rank,
                         ": wait for it, or use another name"));
      }
      keys.push_back(key);
    }
    for (const TensorKeyView& key : keys) {
      in_flight_.emplace(key.first, std::string(key.second));
    }
  }
  const int64_t handle = handles_->Create(static_cast<int>(entries.size()));
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorEntry& entry = *entries[i];
    entry.request.set_rank(config_.rank);
    entry.enqueued = now;
    const bool reserved = entry.request.type() != JOIN;
    // The name is free again before the handle completes, so a caller that
    // has waited for it may reuse the name at once. The entry calls this
    // itself (TensorEntry::done), so its request names the key.
    entry.done = [this, table = handles_, handle, i, reserved,
                  request = &entry.request](const absl::Status& status,
                                            OpResult result) {
      if (reserved) {
        absl::MutexLock lock(&names_mu_);
        in_flight_.erase(
            TensorKeyView(request->process_set(), request->name()));
      }
      // After Abort, whatever failed (a transfer the abort cut short) failed
      // because of it: the caller sees the reason, not the transfer.
      absl::Status final_status = status;
      if (!status.ok()) {
        if (absl::Status aborted = AbortStatus(); !aborted.ok()) {
          final_status = std::move(aborted);
        }
      }
      table->Complete(handle, static_cast<int>(i), final_status,
                      std::move(result));
    };
  }
  const absl::Status aborted = AbortStatus();
  absl::MutexLock lock(&mu_);
  if (!aborted.ok() || stopped_ || stop_requested_) {
    const absl::Status status =
        !aborted.ok() ? aborted
        : final_status_.ok()
            ? absl::FailedPreconditionError("hvd has been shut down")
            : final_status_;
    FailEntries(entries, status);
    return handle;
  }
  for (auto& entry : entries) queue_.push_back(std::move(entry));
  previous_submit_ = last_submit_;
  last_submit_ = now;
  has_work_.store(true, std::memory_order_release);
  return handle;
}

void Runtime::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
    has_work_.store(true, std::memory_order_release);
  }
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mu_);
    reporter_stop_ = true;
  }
  if (reporter_.joinable()) reporter_.join();
  // GPU ops already started finish (every rank executed the same responses).
  if (device_ops_) device_ops_->Shutdown();
  if (coordinator_) {
    const Coordinator::Stats& s = coordinator_->stats();
    {
      absl::MutexLock lock(&mu_);
      final_stats_ = s;
    }
    HVD_LOG(INFO) << "negotiation: " << s.cycles << " cycles, "
                  << s.full_requests << " requests in full, "
                  << s.cached_ready << " tensors by cache bit ("
                  << s.agreed_steps << " steps agreed by exchange), "
                  << s.responses << " responses, " << s.fused_tensors
                  << " tensors fused";
    coordinator_.reset();
  }
  timeline_.Stop();
  absl::MutexLock lock(&data_plane_mu_);
  data_plane_closed_ = true;
  parts_.context.reset();
}

bool Runtime::Ended() {
  absl::MutexLock lock(&mu_);
  return stopped_ || aborted_;
}

void Runtime::Abort(const absl::Status& reason) {
  const absl::Status status =
      reason.ok() ? absl::AbortedError("the runtime was aborted") : reason;
  {
    absl::MutexLock lock(&abort_mu_);
    if (!abort_status_.ok()) return;
    abort_status_ = status;
    abort_set_.store(true, std::memory_order_release);
  }
  {
    // Every wait on a peer returns now, in negotiation or a collective.
    absl::MutexLock lock(&data_plane_mu_);
    if (!data_plane_closed_) {
      if (parts_.context) parts_.context->Abort(status);
      if (device_ops_) device_ops_->Abort(status);
    }
  }
  absl::MutexLock lock(&mu_);
  aborted_ = true;  // and the waits for work
  has_work_.store(true, std::memory_order_release);
}

absl::Status Runtime::AbortStatus() {
  if (!abort_set_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&abort_mu_);
  return abort_status_;
}

bool Runtime::FailIfAborted() {
  absl::Status aborted = AbortStatus();
  if (aborted.ok()) return false;
  FailAll(std::move(aborted));
  return true;
}

Coordinator::Stats Runtime::negotiation_stats() {
  absl::MutexLock lock(&mu_);
  return final_stats_;
}

void Runtime::Report() {
  const std::string key = MetricsKey(config_.rank);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&reporter_stop_),
                               config_.metrics_interval)) {
        return;
      }
    }
    // A failed report is dropped: the next one says the same and more.
    parts_.job_store->Set(key, metrics_.Render(ResidentBytes()))
        .IgnoreError();
  }
}

bool Runtime::StopRequested() {
  absl::MutexLock lock(&mu_);
  return stop_requested_;
}

absl::Status Runtime::Execute(const ResponseList& responses) {
  for (const Response& response : responses.responses()) {
    for (const auto& name : response.names()) {
      timeline_.ActivityStart(name, "QUEUE");
    }
  }
  for (const Response& response : responses.responses()) {
    if (absl::Status s = executor_->Execute(response, pending_); !s.ok()) {
      return s;
    }
  }
  if (responses.has_tuning()) Retune(responses.tuning());
  return absl::OkStatus();
}

void Runtime::Retune(const Tuning& tuning) {
  config_.fusion_threshold = tuning.fusion_threshold();
  config_.cycle_time = absl::Microseconds(tuning.cycle_time_us());
  if (coordinator_) {
    coordinator_->set_fusion_threshold(tuning.fusion_threshold());
  }
  executor_->Retune(tuning);
  HVD_LOG(DEBUG) << "autotune: "
                 << (tuning.frozen() ? "frozen at " : "trying ")
                 << tuning.ShortDebugString();
}

void Runtime::FailAll(absl::Status status) {
  // Whatever failed after an Abort failed because of it. In an elastic job
  // any failure of the data plane ends the round: the caller inits again.
  if (absl::Status aborted = AbortStatus(); !aborted.ok()) {
    status = std::move(aborted);
  } else if (config_.elastic() && !absl::IsFailedPrecondition(status) &&
             !absl::IsAborted(status)) {
    status = absl::AbortedError(status.message());
  }
  if (!status.ok() && !absl::IsFailedPrecondition(status)) {
    HVD_LOG(ERROR) << status.message();
  }
  std::vector<std::unique_ptr<TensorEntry>> doomed;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    final_status_ = status;
    doomed.swap(queue_);
  }
  if (parts_.context && !absl::IsFailedPrecondition(status)) {
    parts_.context->Abort(status);
  }
  if (device_ops_ && !absl::IsFailedPrecondition(status)) {
    device_ops_->Abort(status);
  }
  for (auto& [key, entries] : pending_) {
    for (auto& entry : entries) doomed.push_back(std::move(entry));
  }
  pending_.clear();
  FailEntries(doomed, status);
}

}  // namespace hvd::runtime
