// The rendezvous' TLS for a job hvdrun runs (docs/security.md).
#ifndef HVD_LAUNCHER_JOB_TLS_H_
#define HVD_LAUNCHER_JOB_TLS_H_

#include "absl/status/statusor.h"
#include "core/rendezvous/tls.h"
#include "launcher/options.h"

namespace hvd::launcher {

// A launched job: a new CA and server certificate when some host is remote,
// nothing for a job on this host (its rendezvous listens on 127.0.0.1) or
// with --no-tls (which prints a warning). Internal when OpenSSL fails.
absl::StatusOr<rendezvous::JobCertificates> LaunchedJobTls(const Options& o,
                                                           bool any_remote);

// --rendezvous-only: the --tls-cert/--tls-key pair (InvalidArgument naming
// the file at fault), or plaintext with a warning when none is given.
absl::StatusOr<rendezvous::ServerTls> OrchestratorTls(const Options& o);

}  // namespace hvd::launcher

#endif  // HVD_LAUNCHER_JOB_TLS_H_
