// Orchestrator mode over TLS, end to end on this machine: hvdrun
// --rendezvous-only serves the certificate it is given, an agent with the
// CA that signed it (HVD_RENDEZVOUS_CA, a file) joins and passes it to its
// worker, an agent with another CA is refused, and bad certificate flags
// are usage errors.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/rendezvous/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/test_command.h"

namespace hvd::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class OrchestratorTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = getenv("TEST_TMPDIR");
    auto certs = rendezvous::MakeJobCertificates();
    ASSERT_TRUE(certs.ok()) << certs.status();
    cert_ = Write("cert.pem", certs->server.cert_pem);
    key_ = Write("key.pem", certs->server.key_pem);
    ca_ = Write("ca.pem", certs->ca_pem);
    other_ca_ = Write("other-ca.pem", rendezvous::MakeJobCertificates()->ca_pem);
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = tmp_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The address in hvdrun's --rendezvous-file, once written (10 s at most).
  std::string WaitForAddress(const std::string& file) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      std::ifstream in(file);
      for (std::string line; std::getline(in, line);) {
        absl::string_view rest = line;
        if (absl::ConsumePrefix(&rest, "HVD_RENDEZVOUS_ADDR=")) {
          return std::string(rest);
        }
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return "";
  }
  std::vector<std::string> Agent(const std::string& addr,
                                 const std::string& file,
                                 std::vector<std::string> command) {
    std::vector<std::string> argv = {
        Runfile("agent/hvd-agent"), "--rendezvous", addr, "--slots", "1",
        "--token-file", file, "--connect-timeout", "5"};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  std::string tmp_, cert_, key_, ca_, other_ca_;
};

TEST_F(OrchestratorTlsTest, AnAgentWithTheCaJoinsAndOneWithAnotherIsRefused) {
  const std::string file = tmp_ + "/rdv";
  BackgroundCommand server(
      {Runfile("launcher/hvdrun"), "--rendezvous-only", "-np", "1",
       "--rendezvous-file", file, "--tls-cert", cert_, "--tls-key", key_},
      {"PATH=/usr/bin:/bin"}, tmp_);
  const std::string addr = WaitForAddress(file);
  ASSERT_FALSE(addr.empty());
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                        "HVD_RENDEZVOUS_TLS_NAME=hvd-rendezvous"};
  CommandResult refused = RunCommand(
      Agent(addr, file, {"true"}),
      {env[0], env[1], "HVD_RENDEZVOUS_CA=" + other_ca_}, absl::Seconds(30));
  EXPECT_NE(refused.status.ShellCode(), 0) << refused.err;
  CommandResult joined = RunCommand(
      Agent(addr, file,
            {"sh", "-c",
             "echo ca=${HVD_RENDEZVOUS_CA:+set} name=$HVD_RENDEZVOUS_TLS_NAME"}),
      {env[0], env[1], "HVD_RENDEZVOUS_CA=" + ca_}, absl::Seconds(30));
  EXPECT_TRUE(joined.status.ok()) << joined.err;
  CommandResult rs = server.Wait(absl::Seconds(30));
  EXPECT_TRUE(rs.status.ok()) << rs.err;
  EXPECT_THAT(rs.out, HasSubstr("[0]<stdout>:ca=set name=hvd-rendezvous"));
  EXPECT_THAT(rs.err, Not(HasSubstr("warning")));
}

TEST_F(OrchestratorTlsTest, WithoutACertificateItWarnsThatItIsPlaintext) {
  CommandResult r = RunCommand(
      {Runfile("launcher/hvdrun"), "--rendezvous-only", "-np", "1",
       "--rendezvous-file", tmp_ + "/rdv2", "--start-timeout", "1"},
      {"PATH=/usr/bin:/bin"}, absl::Seconds(30), tmp_);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: warning: no --tls-cert: the "
                               "rendezvous is plaintext"));
}

TEST_F(OrchestratorTlsTest, BadCertificateFlagsAreUsageErrors) {
  auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = {Runfile("launcher/hvdrun"),
                                     "--rendezvous-only", "-np", "1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunCommand(argv, {"PATH=/usr/bin:/bin"}, absl::Seconds(30), tmp_);
  };
  CommandResult alone = run({"--tls-cert", cert_});
  EXPECT_EQ(alone.status.ShellCode(), 2);
  EXPECT_THAT(alone.err, HasSubstr("--tls-cert and --tls-key go together"));
  CommandResult wrong_key = run({"--tls-cert", cert_, "--tls-key", ca_});
  EXPECT_EQ(wrong_key.status.ShellCode(), 2);
  EXPECT_THAT(wrong_key.err, HasSubstr("holds no PEM private key"));
  CommandResult both = run({"--no-tls", "--tls-cert", cert_, "--tls-key", key_});
  EXPECT_EQ(both.status.ShellCode(), 2);
  EXPECT_THAT(both.err, HasSubstr("contradict"));
}

}  // namespace
}  // namespace hvd::launcher
