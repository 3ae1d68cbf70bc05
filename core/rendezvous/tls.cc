#include "core/rendezvous/tls.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "grpc/support/log.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace hvd::rendezvous {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;

absl::Status OpensslError(absl::string_view what) {
  char buf[256] = "unknown error";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat("TLS: ", what, ": ", buf));
}

// `conf` in openssl's extension syntax, e.g. "critical,CA:TRUE".
bool AddExtension(X509* cert, X509* issuer, int nid, const char* conf) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, conf));
  return ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1;
}

struct Extension {
  int nid;
  const char* conf;
};

// A certificate for `common_name` and `key`, signed by `issuer` with
// `issuer_key` (itself when issuer is null: self-signed).
absl::StatusOr<Cert> MakeCert(const std::string& common_name, EVP_PKEY* key,
                              X509* issuer, EVP_PKEY* issuer_key,
                              absl::Duration validity,
                              std::initializer_list<Extension> extensions) {
  Cert cert(X509_new());
  std::unique_ptr<BIGNUM, Free> serial(BN_new());
  if (cert == nullptr || serial == nullptr ||
      X509_set_version(cert.get(), 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) ==
          nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()),
                      absl::ToInt64Seconds(validity)) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpensslError("building a certificate");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(
      name, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) {
    return OpensslError("setting the issuer");
  }
  for (const Extension& e : extensions) {
    if (!AddExtension(cert.get(), signer, e.nid, e.conf)) {
      return OpensslError(absl::StrCat("extension ", e.conf));
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return OpensslError("signing");
  }
  return cert;
}

template <typename Write>
absl::StatusOr<std::string> ToPem(Write write) {
  std::unique_ptr<BIO, Free> bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || write(bio.get()) != 1) {
    return OpensslError("writing PEM");
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  return ToPem([cert](BIO* b) { return PEM_write_bio_X509(b, cert); });
}

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view what) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", what, " '", path, "'"));
  }
  return ss.str();
}

}  // namespace

absl::StatusOr<JobCertificates> MakeJobCertificates(absl::Duration validity) {
  Key ca_key(EVP_EC_gen("P-256"));
  Key server_key(EVP_EC_gen("P-256"));
  if (ca_key == nullptr || server_key == nullptr) {
    return OpensslError("generating a key");
  }
  absl::StatusOr<Cert> ca = MakeCert(
      "hvd job CA", ca_key.get(), nullptr, ca_key.get(), validity,
      {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
       {NID_key_usage, "critical,keyCertSign,cRLSign"},
       {NID_subject_key_identifier, "hash"}});
  if (!ca.ok()) return ca.status();
  const std::string san = absl::StrCat("DNS:", kJobServerName);
  absl::StatusOr<Cert> server = MakeCert(
      kJobServerName, server_key.get(), ca->get(), ca_key.get(), validity,
      {{NID_basic_constraints, "critical,CA:FALSE"},
       {NID_key_usage, "critical,digitalSignature"},
       {NID_ext_key_usage, "serverAuth"},
       {NID_subject_alt_name, san.c_str()},
       {NID_authority_key_identifier, "keyid"}});
  if (!server.ok()) return server.status();
  JobCertificates out;
  absl::StatusOr<std::string> ca_pem = CertPem(ca->get());
  absl::StatusOr<std::string> cert_pem = CertPem(server->get());
  absl::StatusOr<std::string> key_pem = ToPem([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, server_key.get(), nullptr, nullptr, 0,
                                    nullptr, nullptr);
  });
  for (const auto* s : {&ca_pem, &cert_pem, &key_pem}) {
    if (!s->ok()) return s->status();
  }
  out.ca_pem = *std::move(ca_pem);
  out.server.cert_pem = *std::move(cert_pem);
  out.server.key_pem = *std::move(key_pem);
  return out;
}

absl::StatusOr<ServerTls> ReadServerTls(const std::string& cert_file,
                                        const std::string& key_file) {
  ServerTls tls;
  absl::StatusOr<std::string> cert = ReadFile(cert_file, "certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(key_file, "key");
  if (!key.ok()) return key.status();
  std::unique_ptr<BIO, Free> cert_bio(
      BIO_new_mem_buf(cert->data(), static_cast<int>(cert->size())));
  std::unique_ptr<BIO, Free> key_bio(
      BIO_new_mem_buf(key->data(), static_cast<int>(key->size())));
  Cert x(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  Key k(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (x == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "certificate '", cert_file, "' holds no PEM certificate"));
  }
  if (k == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key_file, "' holds no PEM private key"));
  }
  if (X509_check_private_key(x.get(), k.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "key '", key_file, "' does not match certificate '", cert_file, "'"));
  }
  tls.cert_pem = *std::move(cert);
  tls.key_pem = *std::move(key);
  return tls;
}

absl::StatusOr<std::string> PemOrFile(const std::string& value) {
  if (absl::StrContains(value, "-----BEGIN ")) return value;
  absl::StatusOr<std::string> text = ReadFile(value, "CA certificate file");
  if (!text.ok()) return text.status();
  if (!absl::StrContains(*text, "-----BEGIN CERTIFICATE-----")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CA certificate file '", value, "' holds no PEM certificate"));
  }
  return text;
}

void RouteGrpcLogsToHvd() {
  static std::once_flag once;
  std::call_once(once, [] {
    gpr_set_log_function([](gpr_log_func_args* args) {
      const absl::string_view message = args->message;
      if (absl::StrContains(message, "Handshake failed")) {
        HVD_LOG(DEBUG) << "grpc: " << message;
      } else if (args->severity == GPR_LOG_SEVERITY_ERROR) {
        HVD_LOG(ERROR) << "grpc: " << message;
      } else {
        HVD_LOG(DEBUG) << "grpc: " << message;
      }
    });
  });
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const ServerTls& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  RouteGrpcLogsToHvd();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const ClientTls& tls, grpc::ChannelArguments* args) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  RouteGrpcLogsToHvd();
  if (!tls.server_name.empty()) args->SetSslTargetNameOverride(tls.server_name);
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls.ca_pem;
  return grpc::SslCredentials(options);
}

}  // namespace hvd::rendezvous
