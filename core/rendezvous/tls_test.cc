// TLS on the rendezvous: a job's clients reach its server only with its CA,
// and the token is not on the wire in clear (checked by a recording proxy
// between them, which finds it when TLS is off).
#include "core/rendezvous/tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/rendezvous/grpc_store.h"
#include "core/rendezvous/rendezvous_server.h"

namespace hvd::rendezvous {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "c0ffee00-tls-test-token-1234";

// Forwards loopback connections to `target_port` and records every byte the
// clients send.
class RecordingProxy {
 public:
  explicit RecordingProxy(int target_port) : target_port_(target_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = Loopback(0);
    socklen_t len = sizeof(addr);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listener_, 16);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    accept_thread_.join();  // then nothing adds to pumps_
    for (auto& t : pumps_) t.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  std::string sent() {
    absl::MutexLock lock(&mu_);
    return sent_;
  }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    return addr;
  }
  void AcceptLoop() {
    while (!stop_) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr = Loopback(target_port_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr),
                    sizeof(addr)) != 0) {
        ::close(client);
        ::close(server);
        continue;
      }
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
    }
  }
  // Copies both ways until either side closes or the proxy stops.
  void Pump(int client, int server) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    char buf[16384];
    bool closed = false;
    while (!stop_ && !closed) {
      if (::poll(fds, 2, 100) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0 || ::write(fds[1 - i].fd, buf, n) != n) closed = true;
        if (n > 0 && i == 0) {
          absl::MutexLock lock(&mu_);
          sent_.append(buf, n);
        }
      }
    }
    ::close(client);
    ::close(server);
  }

  const int target_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::vector<std::thread> pumps_;  // added to by the accept thread only
  absl::Mutex mu_;
  std::string sent_ ABSL_GUARDED_BY(mu_);
};

class TlsTest : public ::testing::Test {
 protected:
  // Starts a server presenting `tls` (plaintext when empty).
  void Serve(ServerTls tls) {
    RendezvousServerOptions options;
    options.address = "127.0.0.1:0";
    options.token = kToken;
    options.size = 2;
    options.tls = std::move(tls);
    server_ = std::make_unique<RendezvousServer>(options);
    ASSERT_TRUE(server_->Start().ok());
  }
  absl::StatusOr<std::unique_ptr<GrpcStore>> Connect(
      int port, ClientTls tls, absl::Duration timeout = absl::Seconds(20)) {
    GrpcStoreOptions options;
    options.tls = std::move(tls);
    return GrpcStore::Connect(absl::StrCat("127.0.0.1:", port), kToken,
                              timeout, options);
  }
  static JobCertificates Certs() {
    absl::StatusOr<JobCertificates> c = MakeJobCertificates();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : JobCertificates{};
  }
  std::unique_ptr<RendezvousServer> server_;
};

TEST_F(TlsTest, JobCertificatesArePemAndTheCaKeyIsNotAmongThem) {
  const JobCertificates c = Certs();
  EXPECT_TRUE(absl::StartsWith(c.ca_pem, "-----BEGIN CERTIFICATE-----"));
  EXPECT_TRUE(absl::StartsWith(c.server.cert_pem, "-----BEGIN CERTIFICATE-----"));
  EXPECT_TRUE(absl::StartsWith(c.server.key_pem, "-----BEGIN PRIVATE KEY-----"));
  EXPECT_NE(c.ca_pem, c.server.cert_pem);
  EXPECT_NE(Certs().ca_pem, c.ca_pem) << "each job has its own CA";
}

TEST_F(TlsTest, AClientWithTheJobsCaUsesTheStoreThroughTls) {
  const JobCertificates c = Certs();
  Serve(c.server);
  RecordingProxy proxy(server_->port());
  auto store = Connect(proxy.port(), {c.ca_pem, kJobServerName});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("key", "value-in-the-clear?").ok());
  auto value = (*store)->Get("key", absl::Seconds(5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "value-in-the-clear?");
  const std::string sent = proxy.sent();
  EXPECT_FALSE(sent.empty());
  EXPECT_FALSE(absl::StrContains(sent, kToken)) << "the token crossed in clear";
  EXPECT_FALSE(absl::StrContains(sent, "value-in-the-clear?"));
}

TEST_F(TlsTest, WithoutTlsTheProxySeesTheToken) {
  Serve({});
  RecordingProxy proxy(server_->port());
  auto store = Connect(proxy.port(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("key", "v").ok());
  EXPECT_TRUE(absl::StrContains(proxy.sent(), kToken));
}

TEST_F(TlsTest, AnotherJobsCaIsRefused) {
  Serve(Certs().server);
  auto store = Connect(server_->port(), {Certs().ca_pem, kJobServerName},
                       absl::Seconds(2));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(store.status().message(), HasSubstr("HVD_RENDEZVOUS_CA"));
}

TEST_F(TlsTest, ANameOtherThanTheCertificatesIsRefused) {
  const JobCertificates c = Certs();
  Serve(c.server);
  auto store =
      Connect(server_->port(), {c.ca_pem, "someone-else"}, absl::Seconds(2));
  EXPECT_FALSE(store.ok());
}

TEST_F(TlsTest, APlaintextClientCannotUseATlsServer) {
  Serve(Certs().server);
  auto store = Connect(server_->port(), {}, absl::Seconds(2));
  if (store.ok()) {  // the channel may look ready; the first call must fail
    EXPECT_FALSE((*store)->Set("key", "v").ok());
  }
}

TEST_F(TlsTest, ATlsClientCannotUseAPlaintextServer) {
  Serve({});
  auto store = Connect(server_->port(), {Certs().ca_pem, kJobServerName},
                       absl::Seconds(2));
  EXPECT_FALSE(store.ok());
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(ReadServerTls, ReadsAMatchingPairAndNamesWhatIsWrong) {
  const JobCertificates a = *MakeJobCertificates();
  const JobCertificates b = *MakeJobCertificates();
  const std::string cert = WriteTemp("cert.pem", a.server.cert_pem);
  const std::string key = WriteTemp("key.pem", a.server.key_pem);
  auto tls = ReadServerTls(cert, key);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(tls->cert_pem, a.server.cert_pem);

  const std::string other_key = WriteTemp("other.pem", b.server.key_pem);
  EXPECT_THAT(ReadServerTls(cert, other_key).status().message(),
              HasSubstr("does not match certificate"));
  const std::string junk = WriteTemp("junk.pem", "not pem");
  EXPECT_THAT(ReadServerTls(junk, key).status().message(),
              HasSubstr("holds no PEM certificate"));
  EXPECT_THAT(ReadServerTls(cert, "/nonexistent/key.pem").status().message(),
              HasSubstr("cannot read key '/nonexistent/key.pem'"));
}

TEST(PemOrFile, TakesPemTextOrReadsTheFileItNames) {
  const std::string ca = MakeJobCertificates()->ca_pem;
  EXPECT_EQ(*PemOrFile(ca), ca);
  EXPECT_EQ(*PemOrFile(WriteTemp("ca.pem", ca)), ca);
  EXPECT_THAT(PemOrFile(WriteTemp("nope.pem", "x")).status().message(),
              HasSubstr("holds no PEM certificate"));
  EXPECT_THAT(PemOrFile("/nonexistent/ca.pem").status().message(),
              HasSubstr("cannot read CA certificate file"));
}

}  // namespace
}  // namespace hvd::rendezvous
