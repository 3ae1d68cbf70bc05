// The job token: a shared secret every RPC to a job's rendezvous server
// carries, so that processes of other jobs (or stale ones of an earlier job on
// a reused port) cannot read or write its state.
//
// The token is a secret: it never appears on a command line (where `ps`
// shows it to every user of the host) or in a log line. The agents hvdrun
// starts read it on their stdin; workers get it in HVD_JOB_TOKEN.
#ifndef HVD_PROTO_JOB_TOKEN_H_
#define HVD_PROTO_JOB_TOKEN_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hvd {
namespace rendezvous {

// The gRPC metadata key carrying the token on every call.
inline constexpr char kJobTokenMetadataKey[] = "hvd-job-token";

// OK when `token` can travel as gRPC metadata: non-empty printable ASCII
// without spaces, at most 1024 bytes. The error never quotes the token.
absl::Status ValidateJobToken(absl::string_view token);

// Compares in time that depends only on expected.size(), so response timing
// does not reveal how much of a guess was right.
bool JobTokenMatches(absl::string_view presented, absl::string_view expected);

}  // namespace rendezvous
}  // namespace hvd

#endif  // HVD_PROTO_JOB_TOKEN_H_
