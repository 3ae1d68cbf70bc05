#include "launcher/job_tls.h"

#include <cstdio>

namespace hvd::launcher {

absl::StatusOr<rendezvous::JobCertificates> LaunchedJobTls(const Options& o,
                                                           bool any_remote) {
  if (!any_remote) return rendezvous::JobCertificates{};
  if (o.no_tls) {
    std::fprintf(stderr,
                 "hvdrun: warning: --no-tls: the job token crosses the "
                 "network in clear\n");
    return rendezvous::JobCertificates{};
  }
  return rendezvous::MakeJobCertificates();
}

absl::StatusOr<rendezvous::ServerTls> OrchestratorTls(const Options& o) {
  if (!o.tls_cert.empty()) return rendezvous::ReadServerTls(o.tls_cert, o.tls_key);
  std::fprintf(stderr,
               "hvdrun: warning: no --tls-cert: the rendezvous is plaintext "
               "and the job token crosses the network in clear\n");
  return rendezvous::ServerTls{};
}

}  // namespace hvd::launcher
