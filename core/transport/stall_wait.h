// Waiting for a transfer that may never come: the one policy of the data
// plane (the collectives) and of negotiation (the runtime). A wait past the
// stall check time is named in a warning, with the peer and what is
// missing, long before it fails: a stopped or stuck peer is found in
// seconds, not at the timeout.
#ifndef HVD_CORE_TRANSPORT_STALL_WAIT_H_
#define HVD_CORE_TRANSPORT_STALL_WAIT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/transport/transport.h"

namespace hvd::transport {

struct WaitLimits {
  absl::Duration timeout;        // the wait fails after this
  absl::Duration stall_warning;  // a warning after this; zero: none
};

// Waits for `request` until start + limits.timeout. Past start +
// limits.stall_warning (if sooner), logs once "Stall detected: <what> has
// waited <d>: <the request's DeadlineExceeded message, which names the peer
// and the bytes done>; it fails after <timeout>", and goes on waiting.
absl::Status WaitNamingStalls(Request& request, absl::Time start,
                              const WaitLimits& limits, absl::string_view what);

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_STALL_WAIT_H_
