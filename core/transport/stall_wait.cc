#include "core/transport/stall_wait.h"

#include "core/common/logging.h"

namespace hvd::transport {

absl::Status WaitNamingStalls(Request& request, absl::Time start,
                              const WaitLimits& limits,
                              absl::string_view what) {
  if (limits.stall_warning > absl::ZeroDuration() &&
      limits.stall_warning < limits.timeout) {
    absl::Status status = request.Wait(start + limits.stall_warning);
    if (!absl::IsDeadlineExceeded(status)) return status;
    HVD_LOG(WARNING) << "Stall detected: " << what << " has waited "
                     << absl::FormatDuration(limits.stall_warning) << ": "
                     << status.message() << "; it fails after "
                     << absl::FormatDuration(limits.timeout);
  }
  return request.Wait(start + limits.timeout);
}

}  // namespace hvd::transport
