// Process-wide state behind the C ABI (c_api.cc, c_api_ops.cc,
// c_api_options.cc, c_api_elastic.cc).
#ifndef HVD_CORE_API_STATE_H_
#define HVD_CORE_API_STATE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/bootstrap/elastic_client.h"
#include "core/c_api.h"
#include "core/common/cancellation.h"
#include "core/runtime/config.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/runtime.h"

namespace hvd::api {

// Handles outlive any one runtime (shutdown, re-init).
runtime::HandleTable& Handles();
// The running runtime, or nullptr before init / after shutdown. The shared
// pointer keeps it alive for the caller even if shutdown runs meanwhile.
std::shared_ptr<runtime::Runtime> Current();
// Sets the calling thread's hvd_last_error text; returns HVD_ERROR (-1).
int SetLastError(const absl::Status& status);
// "allreduce.noname.7" ("allreduce.noname.set2.7" outside the global set):
// one counter per op and process set, so ranks that call the same ops of a
// set in the same order agree, whatever else each of them runs.
std::string GeneratedName(const char* op, int process_set);
// Drops the counters of a removed process set (ids are not reused; a job
// that adds and removes sets would otherwise keep one per set and op).
void ForgetGeneratedNames(int process_set);
// Drops every counter: each init starts them at 0, as every other member of
// the job (in an elastic job, new members too) does.
void ResetGeneratedNames();

// Elastic jobs (c_api_elastic.cc). hvd_init and hvd_shutdown call these
// with their lifecycle lock held; hvd_elastic_* read the state at any time.
//
// Records whether `config` is an elastic worker's; if it is, joins the
// round after the one this process joined last and puts the round's
// identity into *config (rank, size, local and cross, elastic_round).
// JoinRound's errors (CANCELLED: the worker is no longer in the job).
absl::Status JoinElasticRound(runtime::Config* config);
// In an elastic job, watches the round `config` joined until
// TakeElasticWatcher, from before its members connect: the round's abort
// cancels the returned cancellation (for ConnectJob: ABORTED "elastic round
// N ended while connecting: <the launcher's reason>") and aborts the runtime
// given to AttachElasticRuntime. Its host updates are kept for
// hvd_elastic_host_updates. Null outside elastic jobs.
absl::StatusOr<std::shared_ptr<const Cancellation>> WatchElasticRound(
    const runtime::Config& config);
// The round's runtime, started: aborted at once if the round has already
// ended. No-op outside elastic jobs.
void AttachElasticRuntime(const std::shared_ptr<runtime::Runtime>& runtime);
// A failure to connect the members of an elastic round, as the caller
// should see it: a member lost meanwhile (a timeout, an unreachable peer)
// ends the round, ABORTED, so that the caller inits again and joins the
// next one. Other errors, and those of fixed jobs, as they are.
absl::Status ElasticConnectError(const runtime::Config& config,
                                 const absl::Status& status);
// The running watcher, for the caller to stop (destroy) with no lock held;
// null if none.
std::unique_ptr<bootstrap::RoundWatcher> TakeElasticWatcher();
// A copy of the caller's `options`, or the defaults for NULL. A struct_size
// other than sizeof(hvd_options) is refused (InvalidArgument, also set as
// the thread's last error): then only that first field has been read.
absl::StatusOr<hvd_options> ReadOptions(const hvd_options* options);

}  // namespace hvd::api

#endif  // HVD_CORE_API_STATE_H_
