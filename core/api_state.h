// Process-wide state behind the C ABI (c_api.cc, c_api_ops.cc,
// c_api_options.cc).
#ifndef HVD_CORE_API_STATE_H_
#define HVD_CORE_API_STATE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/c_api.h"
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
// A copy of the caller's `options`, or the defaults for NULL. A struct_size
// other than sizeof(hvd_options) is refused (InvalidArgument, also set as
// the thread's last error): then only that first field has been read.
absl::StatusOr<hvd_options> ReadOptions(const hvd_options* options);

}  // namespace hvd::api

#endif  // HVD_CORE_API_STATE_H_
