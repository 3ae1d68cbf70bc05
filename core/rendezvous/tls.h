// TLS on the rendezvous' gRPC channels (hvdrun's server; the agents' and
// workers' clients), so the job token never crosses the network in clear
// and a client talks only to its own job's server.
//
// hvdrun makes a certificate authority for each job (MakeJobCertificates):
// the server presents a certificate it signed, for the name
// kJobServerName; agents get the CA certificate with their bootstrap and
// pass it to workers (HVD_RENDEZVOUS_CA), and every client checks the
// server's chain against it. The CA's key is discarded once the server's
// certificate is signed. Clients are not asked for certificates: the job
// token, now inside TLS, authenticates them.
//
// An orchestrator brings its own certificate and key (files, e.g. a
// Kubernetes Secret) and gives workers the CA that signed it.
//
// Thread-safe: plain functions of their arguments.
#ifndef HVD_CORE_RENDEZVOUS_TLS_H_
#define HVD_CORE_RENDEZVOUS_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace grpc {
class ChannelArguments;
class ChannelCredentials;
class ServerCredentials;
}  // namespace grpc

namespace hvd::rendezvous {

// The name in the server certificate of a job hvdrun launches, which its
// clients check instead of the address they dial (hosts have many).
inline constexpr char kJobServerName[] = "hvd-rendezvous";

// What a server presents; both empty: plaintext.
struct ServerTls {
  std::string cert_pem;  // its certificate, then any intermediates
  std::string key_pem;
  bool enabled() const { return !cert_pem.empty(); }
};

// What a client trusts; ca_pem empty: plaintext.
struct ClientTls {
  std::string ca_pem;
  // The name the server's certificate must carry; empty: the host part of
  // the address dialled.
  std::string server_name;
  bool enabled() const { return !ca_pem.empty(); }
};

struct JobCertificates {
  std::string ca_pem;  // for the clients (ClientTls::ca_pem)
  ServerTls server;    // for kJobServerName, signed by that CA
};

// A new CA (ECDSA P-256) and a server certificate it signed for
// kJobServerName, valid from an hour ago for `validity`. Internal when
// OpenSSL fails.
absl::StatusOr<JobCertificates> MakeJobCertificates(
    absl::Duration validity = absl::Hours(24 * 30));

// Reads a certificate (chain) and key from PEM files. InvalidArgument naming
// the file that cannot be read, is not PEM, or whose key does not match.
absl::StatusOr<ServerTls> ReadServerTls(const std::string& cert_file,
                                        const std::string& key_file);

// `value` itself when it is PEM text, else the contents of the file it names
// (what HVD_RENDEZVOUS_CA holds). InvalidArgument naming the file otherwise.
absl::StatusOr<std::string> PemOrFile(const std::string& value);

// Routes gRPC's own log lines into hvd's log, with failed TLS handshakes at
// DEBUG: gRPC prints each on stderr, so anyone who can connect (a port
// scanner, a plaintext client) could fill a job's output. Process-wide and
// idempotent; the credential functions below call it when TLS is on.
void RouteGrpcLogsToHvd();

// Insecure credentials when TLS is not enabled.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const ServerTls& tls);
// Sets the name override on `args` when tls.server_name is given.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const ClientTls& tls, grpc::ChannelArguments* args);

}  // namespace hvd::rendezvous

#endif  // HVD_CORE_RENDEZVOUS_TLS_H_
