// Connects this process to its job: the one place where the transports are
// chosen and built. From a Config it reaches the rendezvous server (gRPC),
// registers, connects every peer over TCP or RDMA (Config::transport: auto
// takes RDMA only where every rank has a hardware fabric's provider), and
// routes the peers on this host
// through shared memory (unless Config::shm is off), giving the runtime its
// parts ready-made.
#ifndef HVD_CORE_BOOTSTRAP_CONNECT_H_
#define HVD_CORE_BOOTSTRAP_CONNECT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/common/cancellation.h"
#include "core/runtime/config.h"
#include "core/runtime/runtime.h"

namespace hvd::bootstrap {

// A job of size 1 gets no context and no store. Each call uses fresh store
// keys, so a process can shut down and connect again. Errors name the rank
// and what failed: the rendezvous address, a peer's rank and address, the
// shared-memory set-up. Once `cancel` (optional) is cancelled, waits on the
// store and on peers' connections give up with its status within a fraction
// of a second; the store in the parts stays cancellable that way.
absl::StatusOr<runtime::RuntimeParts> ConnectJob(
    const runtime::Config& config,
    std::shared_ptr<const Cancellation> cancel = nullptr);

}  // namespace hvd::bootstrap

#endif  // HVD_CORE_BOOTSTRAP_CONNECT_H_
