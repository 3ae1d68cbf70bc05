#include "core/bootstrap/self_rendezvous.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/bootstrap/pmix_exchange.h"
#include "core/common/random_hex.h"

namespace hvd::bootstrap {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// The secret, made first if missing: written whole to a file of its own,
// then linked into place, so that ranks racing on a shared home all read
// the one that won.
absl::StatusOr<std::string> ReadOrMakeSecret(const std::string& path) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Errno("cannot make", dir);
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    absl::StatusOr<std::string> fresh = RandomHex(32);
    if (!fresh.ok()) return fresh.status();
    const std::string tmp = absl::StrCat(path, ".", getpid());
    int out = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) return Errno("cannot write", tmp);
    const bool written =
        write(out, fresh->data(), fresh->size()) ==
        static_cast<ssize_t>(fresh->size());
    close(out);
    if (!written || (link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST)) {
      unlink(tmp.c_str());
      return Errno("cannot make", path);
    }
    unlink(tmp.c_str());
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) return Errno("cannot read", path);
  struct stat st;
  std::string secret(256, '\0');
  const ssize_t n = fstat(fd, &st) == 0 ? read(fd, secret.data(), 256) : -1;
  close(fd);
  if (n <= 0) return Errno("cannot read", path);
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " can be read by others than its owner: chmod 600 it (it keys "
        "the job tokens of your jobs)"));
  }
  secret.resize(static_cast<size_t>(n));
  return secret;
}


}  // namespace

absl::StatusOr<std::string> DeriveJobToken(const std::string& secret_file,
                                           const std::string& job_id) {
  absl::StatusOr<std::string> secret = ReadOrMakeSecret(secret_file);
  if (!secret.ok()) return secret.status();
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret->data(), static_cast<int>(secret->size()),
       reinterpret_cast<const unsigned char*>(job_id.data()), job_id.size(),
       mac, &length);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), length));
}

SelfRendezvous::SelfRendezvous(std::unique_ptr<RendezvousServer> server,
                               std::vector<std::string> rank_hosts)
    : server_(std::move(server)), rank_hosts_(std::move(rank_hosts)) {}

SelfRendezvous::~SelfRendezvous() {
  if (server_) server_->Shutdown();
}

absl::StatusOr<std::unique_ptr<SelfRendezvous>> SelfRendezvous::Prepare(
    runtime::Config* config, PmixRecord* pmix_record) {
  runtime::Config& c = *config;
  if (c.launched_by.empty() || c.size <= 1) return nullptr;
  // A later init of a process mpirun started keeps the first one's record.
  const bool exchange =
      c.rendezvous_over_pmix && pmix_record->rendezvous_addr.empty();
  if (c.rendezvous_over_pmix && !exchange) {
    c.rendezvous_addr = pmix_record->rendezvous_addr;
    if (c.token.empty()) c.token = pmix_record->token;
  }
  const bool serve = c.rank == 0 && (c.serve_rendezvous ||
                                     c.rendezvous_over_pmix);
  if (c.token.empty() && c.rendezvous_over_pmix && c.rank == 0) {
    absl::StatusOr<std::string> token = RandomHex(32);
    if (!token.ok()) return token.status();
    c.token = *token;
  } else if (c.token.empty() && !c.rendezvous_over_pmix) {
    if (c.secret_file.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          c.launched_by, " started this job without hvdrun, and neither "
          "HVD_JOB_TOKEN nor HOME (for ~/.hvd/secret) is set"));
    }
    absl::StatusOr<std::string> token = DeriveJobToken(c.secret_file, c.job_id);
    if (!token.ok()) return token.status();
    c.token = *token;
  }
  std::unique_ptr<RendezvousServer> server;
  if (serve) {
    // The same port and token at each init: the others may come early.
    // Over PMIx the first init's port is the system's choice.
    const std::string port =
        c.rendezvous_addr.empty()
            ? "0"
            : c.rendezvous_addr.substr(c.rendezvous_addr.rfind(':') + 1);
    RendezvousServerOptions options;
    options.address = absl::StrCat("0.0.0.0:", port);
    options.token = c.token;
    options.size = c.size;
    options.init_count = c.init_count;
    server = std::make_unique<RendezvousServer>(std::move(options));
    if (absl::Status s = server->Start(); !s.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "rank 0 (started by ", c.launched_by,
          ") cannot serve hvd's rendezvous on port ", port, ": ",
          s.message(), "; set HVD_RENDEZVOUS_ADDR to a free host:port"));
    }
    if (exchange) {
      c.rendezvous_addr = absl::StrCat(c.hostname, ":", server->port());
    }
  }
  if (exchange) {
    if (absl::Status s = ExchangeOverPmix(&c); !s.ok()) return s;
    *pmix_record = {c.rendezvous_addr, c.token};
  }
  return std::unique_ptr<SelfRendezvous>(
      new SelfRendezvous(std::move(server), c.rank_hosts));
}

absl::Status SelfRendezvous::Explain(const absl::Status& status,
                                     int size) const {
  if (!server_ || status.ok()) return status;
  std::set<int> missing;
  for (int r = 0; r < size; ++r) missing.insert(r);
  std::vector<std::string> arrived;
  for (const WorkerInfo& w : server_->Workers()) {
    missing.erase(w.rank);
    arrived.push_back(absl::StrCat(w.rank, " on ", w.hostname));
  }
  if (missing.empty()) return status;
  std::vector<std::string> named;
  for (int r : missing) {
    named.push_back(static_cast<size_t>(r) < rank_hosts_.size()
                        ? absl::StrCat(r, " on ", rank_hosts_[r])
                        : absl::StrCat(r));
  }
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), "; ranks that never reached the "
                   "rendezvous: ", absl::StrJoin(named, ", "),
                   " (arrived: ", absl::StrJoin(arrived, ", "), ")"));
}

}  // namespace hvd::bootstrap
