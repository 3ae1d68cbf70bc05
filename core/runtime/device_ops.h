// The executor's GPU slot: what the runtime asks of a device backend for the
// responses on GPU tensors. A pure interface with no CUDA in it; core/gpu
// provides the NCCL implementation (built only where CUDA exists) and the
// runtime runs without one (GPU tensors are then refused at enqueue).
//
// Threading: Execute and RemoveProcessSet run in the runtime's cycles (one at
// a time, on the background thread or on a framework thread that drives
// them), Shutdown on the thread shutting the runtime down; MarkReady and
// Progress on framework threads; Abort on any thread. A backend runs its GPU
// work on threads of its own and never blocks a cycle on a GPU stream.
#ifndef HVD_CORE_RUNTIME_DEVICE_OPS_H_
#define HVD_CORE_RUNTIME_DEVICE_OPS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/collectives/collectives.h"
#include "core/rendezvous/store.h"
#include "core/runtime/config.h"
#include "core/runtime/entry.h"
#include "proto/negotiation.pb.h"
#include "core/transport/transport.h"

namespace hvd::runtime {

class DeviceOps {
 public:
  // Destroying a backend that was not shut down aborts what is in flight.
  virtual ~DeviceOps() = default;

  // Captures the work queued so far on `stream` (a cudaStream_t; nullptr is
  // the legacy default stream) of CUDA device `device_id`: the op reads its
  // input only after that work. Thread-safe. Errors carry the CUDA error text
  // and the device.
  virtual absl::StatusOr<std::shared_ptr<ReadyEvent>> MarkReady(
      int device_id, void* stream) = 0;

  // Starts `response` (a data op on GPU tensors; this rank is member
  // `group.index` of its process set; the backend keeps the response, so
  // callers that are done with theirs move it in). Takes every non-null
  // entry out of `entries` (null ones are ranks that joined) and completes
  // each exactly once, later (on a thread of its own, or in Progress), when
  // the GPU work on its memory has finished or failed. Returns at once. Non-OK
  // only when the backend cannot run anything any more (the job must stop); the
  // entries are still taken.
  virtual absl::Status Execute(
      Response response, std::vector<std::unique_ptr<TensorEntry>>& entries,
      const collectives::Group& group) = 0;

  // Completes, on the calling thread, the ops whose GPU work has finished,
  // in order as the backend's own threads would, and returns at once: a
  // caller waiting for its op polls this rather than sleep until another
  // thread notices and wakes it. Failures, timeouts and aborts stay with the
  // backend's threads. True while ops are in flight (worth polling again),
  // false when none is.
  virtual bool Progress() = 0;

  // Process set `id` was removed on every rank: its communicators may go.
  virtual void RemoveProcessSet(int id) = 0;

  // A peer or the data plane failed: in-flight and later ops fail with
  // `reason`, and communicators are aborted (ncclCommAbort) so that no op
  // waits on a GPU stream for a peer that is gone. Idempotent; the first
  // reason is kept.
  virtual void Abort(const absl::Status& reason) = 0;

  // Lets the ops already started finish (bounded by the data-plane timeout,
  // then aborted), completes them, and stops the backend's threads. Execute
  // is not called afterwards; MarkReady still may be. Idempotent.
  virtual void Shutdown() = 0;
};

// Makes a CPU data-plane context for `rank` of `size` processes that meet
// in `store` (each under its own key prefix); the context may keep `store`
// (a TCP context looks its peers up there as it first reaches them).
using ContextFactory =
    std::function<absl::StatusOr<std::unique_ptr<transport::Context>>(
        int rank, int size, std::shared_ptr<Store> store)>;

// What a backend is built from. `store` is not owned and outlives the
// backend.
struct DeviceEnv {
  Config config;
  // The runtime's scoped rendezvous store (NCCL unique ids, GPU identities);
  // nullptr in a job of size 1.
  Store* store = nullptr;
  // A CPU data-plane context among `size` processes meeting in `store` (for
  // the staged path and the cross-host step of hierarchical allreduce, which
  // run apart from the background thread's context).
  ContextFactory make_context;
  collectives::CollectiveOptions collective_options;
};

// Makes the backend at init. Must not fail on a machine without a GPU (a job
// on CPU tensors runs there); errors are for bad configuration.
using DeviceOpsFactory =
    std::function<absl::StatusOr<std::unique_ptr<DeviceOps>>(
        const DeviceEnv& env)>;

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_DEVICE_OPS_H_
