// The process's hvd runtime: owns the background thread that negotiates and
// executes collectives over a job's data plane that is handed to it already
// connected (core/bootstrap makes one from a Config; tests make one in
// process), and hands out handles.
//
// Background loop, one cycle: take what the framework enqueued; send this
// rank's requests (and response-cache bits) to rank 0; receive the responses
// everybody runs; run them. A rank other than 0 starts a cycle at once when
// work is enqueued, at once again while its tensors wait for other ranks
// (a bounded number of times), otherwise every HVD_CYCLE_TIME. Rank 0 does
// not sleep on a timer: its cycle starts when every peer's list is in, and
// when nothing is ready only because rank 0 has not yet submitted a tensor
// the others have, it holds the answer (up to HVD_CYCLE_TIME) for that
// submission. So a tensor is negotiated as soon as its last rank submits it,
// whichever rank that is.
//
// A caller that waits for its own handle runs those cycles itself (Drive)
// while no other cycle runs, and the background thread stays out of its way
// while callers do so: a call then never hands over to another thread and
// back, which on a busy host costs more than the collective.
#ifndef HVD_CORE_RUNTIME_RUNTIME_H_
#define HVD_CORE_RUNTIME_RUNTIME_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/rendezvous/store.h"
#include "core/runtime/autotune.h"
#include "core/runtime/config.h"
#include "core/runtime/coordinator.h"
#include "core/runtime/device_ops.h"
#include "core/runtime/entry.h"
#include "core/runtime/executor.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/metrics.h"
#include "core/runtime/process_sets.h"
#include "core/runtime/response_cache.h"
#include "core/runtime/tensor_key.h"
#include "core/runtime/timeline.h"
#include "core/transport/stall_wait.h"
#include "core/transport/transport.h"

namespace hvd::runtime {

// What a runtime is built from: this rank's part of a connected job.
struct RuntimeParts {
  // The data plane among all `size` ranks. Null only in a job of size 1.
  std::unique_ptr<transport::Context> context;
  // The job's rendezvous store, scoped to this init (device backends publish
  // their ids here). Null only in a job of size 1.
  std::shared_ptr<Store> store;
  // The same store unscoped: what each init replaces rather than adds to
  // (this rank's metrics report). Null only in a job of size 1.
  std::shared_ptr<Store> job_store;
  // Host index of every rank (equal: same host), for the hierarchical
  // allreduce; empty when unknown.
  std::vector<int> hosts;
  // Makes further contexts in `store` (device backends' CPU data planes);
  // null when there is no way to (device backends then fail to start).
  ContextFactory make_context;
};

// Thread-safe API. The C ABI keeps one per process; tests run several in one
// process, one per rank.
class Runtime {
 public:
  // Starts the background thread over `parts` (whose size must be
  // config.size). `handles` (not owned) outlives the runtime: the C ABI
  // keeps one table for the process so handles stay valid across shutdown
  // and re-init. `device_factory` makes the GPU backend (none: GPU tensors
  // are refused). Errors: the timeline file or the device backend.
  static absl::StatusOr<std::unique_ptr<Runtime>> Start(
      const Config& config, RuntimeParts parts, HandleTable* handles,
      DeviceOpsFactory device_factory = nullptr);
  ~Runtime();  // Shuts down if still running.
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Config& config() const { return config_; }
  ProcessSetTable& process_sets() { return sets_; }
  Timeline& timeline() { return timeline_; }
  // The GPU backend, or nullptr when this build has none. Set before the
  // background thread starts and kept until the runtime is destroyed.
  DeviceOps* device_ops() { return device_ops_.get(); }

  // Queues `entries` as one handle (a group when several). Entries get
  // request.rank and done set here. A name (within its process set) that is
  // still in flight on this rank -- submitted and not yet completed -- is
  // refused with InvalidArgument before anything is queued, and the
  // operation already under that name goes on unaffected (as in Horovod).
  absl::StatusOr<int64_t> Submit(
      std::vector<std::unique_ptr<TensorEntry>> entries);
  // Runs this rank's cycles on the calling thread until `handle` is done,
  // `deadline` passes or the runtime stops, whichever is first; a cycle
  // already begun runs to its end (waits on peers are bounded by the stall
  // limits). While another thread runs a cycle it waits for the handle
  // instead. Returns at once, doing nothing, with HVD_CALLER_PROGRESS=0.
  // Any thread; the caller then waits for the handle as usual.
  void Drive(int64_t handle, absl::Time deadline);
  // Asks every rank to stop, waits for this rank's background thread.
  void Shutdown();
  // True once this rank's part of the job has ended by itself: a stall
  // shutdown, another rank's Shutdown, a failure of the data plane, an
  // Abort. Every later op fails; Shutdown is still to be called.
  bool Ended();
  // Ends this rank's part of the job from outside (an elastic round is
  // over): every pending and later op fails with `reason` (give ABORTED,
  // naming what was lost), within milliseconds: the data plane and the
  // device backend are aborted, so waits on a peer, in negotiation or inside
  // a collective, return at once. Thread-safe and callable from any thread
  // at any time, before or during Shutdown too; the first reason is kept.
  // Shutdown is still called afterwards (and then returns at once). In an
  // elastic job (Config::elastic()) a failure that ends the job any other
  // way -- a peer lost, or aborted first -- is ABORTED too, with its message.
  void Abort(const absl::Status& reason);
  // Rank 0's negotiation counters, final once Shutdown has returned (zero on
  // other ranks).
  Coordinator::Stats negotiation_stats();
  // This rank's counters (the framework bindings set the step time).
  Metrics& metrics() { return metrics_; }

 private:
  Runtime(const Config& config, RuntimeParts parts, HandleTable* handles);
  void Loop();
  // The background thread's wait before a cycle: while callers drive, or
  // did in the last 500 µs; then, if `wait_for_work`, for work or
  // `cycle_end`. True: run a cycle now. False: a caller started driving
  // meanwhile; wait again.
  bool AwaitTurn(bool wait_for_work, absl::Time cycle_end,
                 absl::Time last_busy);
  // Whether the background thread waits for work or its cycle timer before
  // its next cycle (AwaitTurn's `wait_for_work`).
  bool WaitsForWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Whether such a cycle is due now: there is work, its timer has run out,
  // or the loop's waits are over.
  bool CycleDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // One cycle of the loop: negotiate, then execute. `waited`: the caller has
  // waited for work already (AwaitTurn). False once the loop has ended (a
  // failure or shutdown; every entry failed): no more cycles then.
  bool RunCycle(bool waited) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Whether a cycle has anything to do for this rank: submissions queued,
  // requests still negotiated, or a list to send again at once. A caller
  // whose op runs outside the cycles (on a GPU stream) waits for its handle
  // while there is none.
  bool CycleHasWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // A caller's wait for `handle`, whose op runs on a GPU stream: polls the
  // device backend (DeviceOps::Progress), yielding the CPU in between, until
  // the handle is done or a cycle has work (true), or until nothing is in
  // flight on the device or `until` (false: sleep on the handle instead).
  bool PollDevice(int64_t handle, absl::Time until);
  // RunCycle's body; false when the loop must end.
  bool CycleBody(bool waited) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Whether this rank reports metrics_ (HVD_METRICS_INTERVAL set, in a job
  // with a store); only then does it count them.
  bool Reports() const {
    return config_.metrics_interval > absl::ZeroDuration() &&
           parts_.job_store != nullptr;
  }
  // Publishes metrics_ in the store every config_.metrics_interval.
  void Report();
  // Waits until work is queued, the runtime stops or aborts, or
  // `cycle_end`; polls first for a while after a busy cycle (`last_busy`).
  // True if a stop was requested.
  bool WaitForWork(absl::Time cycle_end, absl::Time last_busy);
  // Before a cycle the background thread starts, when submissions come in a
  // burst (two or more queued, or the last two less than
  // config_.submit_settle apart): sleeps until none came for
  // config_.submit_settle, at most config_.cycle_time in all, so the burst
  // (a framework's gradients, one call each) is negotiated whole. A lone op
  // goes at once. Runs off cycle_mu_: false when a caller came to wait
  // meanwhile (Drive), which then runs the cycle itself.
  bool SettleSubmissions();
  bool StopRequested();
  // Whether the loop's waits should end: a stop was asked for, the runtime
  // was aborted, or the loop has failed everything.
  bool Over() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_requested_ || aborted_ || stopped_;
  }
  // When the next timed cycle is due (on rank 0, the next vote on a cached
  // step; it gathers at once otherwise).
  absl::Time CycleEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_) {
    return cycle_start_ + CycleTimeAfter(config_, idle_cycles_);
  }
  RequestList BuildRequests() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // A step of cached tensors agreed by one exchange among all ranks
  // (HVD_CACHED_EXCHANGE), without rank 0's gather: when every rank's list
  // `mine` holds the same cache bits and nothing else, and rank 0 has
  // nothing pending, each rank computes the coordinator's answer itself
  // (in a job of one, with no exchange). Tried only when VotesFirst(). The
  // answer is cached_steps_'s, valid until the next cycle; nullptr: no
  // agreement, negotiate as usual (every rank then does).
  absl::StatusOr<const ResponseList*> AgreeCachedStep(const RequestList& mine)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Whether the next cycle starts with the cached-step vote (the same on
  // every rank): the exchange is on, and the last cycle ran a step of the
  // global set (try_exchange_). In a job of one the vote is this rank's
  // own, exchanged with nobody: a step of cached tensors only is answered
  // from the kept step without the coordinator's pass over its tables.
  bool VotesFirst() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_) {
    return config_.cached_exchange && try_exchange_;
  }
  // Size 1, or a rank other than 0: its subtree's lists up to its parent in
  // the negotiation tree (negotiation_tree.h), and the answer back down
  // (kept in negotiated_).
  absl::StatusOr<const ResponseList*> Negotiate(const RequestList& mine)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Any other rank's cycle (or a job of one): waits for work unless
  // `waited` (or a resend is due), then agrees the step by the exchange or
  // negotiates it. *busy: whether this rank announced work. The answer is
  // valid until the next cycle; the abort's status once aborted.
  absl::StatusOr<const ResponseList*> MemberCycle(bool waited, bool* busy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Rank 0 of a larger job; *busy: whether any rank announced work. The
  // answer is negotiated_ or cached_steps_'s, valid until the next cycle.
  absl::StatusOr<const ResponseList*> CoordinatorCycle(bool* busy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Every other rank's list, gathered from rank 0's children's bundles.
  absl::StatusOr<std::vector<std::string>> GatherLists()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Receives one bundle from each of `children` (waits named from `start`).
  absl::Status ReceiveBundles(const std::vector<int>& children,
                              absl::Time start,
                              std::vector<std::string>* bundles)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Sends rank 0's answer to each of `children` and waits for the sends.
  absl::Status SendToChildren(const std::vector<int>& children,
                              const std::string& reply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Runs `responses` (the device backend gets a copy of those on GPU
  // tensors).
  absl::Status Execute(const ResponseList& responses)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // Switches this rank to the autotuner's values (every rank does, after the
  // same list).
  void Retune(const Tuning& tuning) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  void FailAll(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);
  // OK, or the reason Abort was given.
  absl::Status AbortStatus();
  // Fails everything with the abort reason if Abort was called; true then.
  bool FailIfAborted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cycle_mu_);

  // The identity never changes. The knobs the autotuner tunes (cycle time,
  // fusion threshold) change in a cycle, and only cycles read them.
  Config config_;
  // Every wait for a peer, in negotiation and in the collectives: a warning
  // naming it past the stall check time, failure at the stall shutdown time
  // (if set) or the timeout. Derived from config_ once.
  const transport::WaitLimits wait_limits_;
  RuntimeParts parts_;
  HandleTable* handles_;
  ProcessSetTable sets_;
  // Held for the whole of a cycle, by the background thread or a caller in
  // Drive: one cycle at a time, and everything marked "cycles only" is
  // touched by the holder alone.
  absl::Mutex cycle_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Whether the background thread holds cycle_mu_ (LoopCycleLock), whose
  // release nudges the callers that wait for it.
  std::atomic<bool> loop_holds_cycle_{false};
  ResponseCache cache_;  // cycles only (the coordinator keeps a pointer)
  Timeline timeline_;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::unique_ptr<Autotuner> autotuner_;      // rank 0, with HVD_AUTOTUNE
  std::unique_ptr<DeviceOps> device_ops_;
  std::unique_ptr<Executor> executor_;
  PendingTable pending_ ABSL_GUARDED_BY(cycle_mu_);
  // The cycle's answer: negotiated, or a cached step's (kept for the next
  // step like it).
  ResponseList negotiated_ ABSL_GUARDED_BY(cycle_mu_);
  CachedStepMemo cached_steps_ ABSL_GUARDED_BY(cycle_mu_);

  // (process set, name) of every entry submitted and not yet completed.
  // Its own mutex: entries complete (and leave it) with mu_ held too.
  absl::Mutex names_mu_;
  TensorKeySet in_flight_ ABSL_GUARDED_BY(names_mu_);

  // The reason Abort was given (read on every failed completion).
  absl::Mutex abort_mu_;
  absl::Status abort_status_ ABSL_GUARDED_BY(abort_mu_);
  // Set once abort_status_ is: read without the lock, several times a call.
  std::atomic<bool> abort_set_{false};
  // Keeps Abort from reaching the data plane and the device backend while
  // Shutdown closes them (the background thread needs no lock: it is
  // joined before they are closed).
  absl::Mutex data_plane_mu_;
  bool data_plane_closed_ ABSL_GUARDED_BY(data_plane_mu_) = false;

  absl::Mutex mu_;
  std::vector<std::unique_ptr<TensorEntry>> queue_ ABSL_GUARDED_BY(mu_);
  // When the last two submissions came (SettleSubmissions).
  absl::Time previous_submit_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_submit_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;  // wakes the loop's waits
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);  // why the loop ended
  Coordinator::Stats final_stats_ ABSL_GUARDED_BY(mu_);  // set at Shutdown
  std::thread thread_;
  // What this rank has done (metrics.h); counted and reported by reporter_
  // only when Reports(), until reporter_stop_.
  Metrics metrics_;
  std::thread reporter_;
  bool reporter_stop_ ABSL_GUARDED_BY(mu_) = false;
  // Set with each Submit, cleared when the loop takes the queue: what the
  // loop polls for right after a busy cycle.
  std::atomic<bool> has_work_{false};
  // The loop's state between cycles.
  absl::Time cycle_start_ ABSL_GUARDED_BY(cycle_mu_);
  absl::Time last_busy_ ABSL_GUARDED_BY(cycle_mu_);
  int idle_cycles_ ABSL_GUARDED_BY(cycle_mu_) = 0;  // ResponseList.idle
  int resends_ ABSL_GUARDED_BY(cycle_mu_) = 0;
  bool resend_now_ ABSL_GUARDED_BY(cycle_mu_) = false;
  // The last cycle ran responses of the global set (the same on every
  // rank): only then does the next try the cached-step exchange, so that
  // cycles waiting for a rank, idle ones, and those of sets that leave
  // rank 0 out send nothing more than before nor wait for rank 0's work.
  bool try_exchange_ ABSL_GUARDED_BY(cycle_mu_) = false;
  bool loop_ended_ ABSL_GUARDED_BY(cycle_mu_) = false;
  // Callers in Drive now, and when the last one left: the background thread
  // waits while either is recent.
  int drivers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_driven_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // A caller left a long drive: the background thread looks again now.
  bool long_drive_ended_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_RUNTIME_H_
