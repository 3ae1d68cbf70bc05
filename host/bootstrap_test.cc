#include "host/bootstrap.h"

#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Bootstrap, RoundTripsThroughAPipe) {
  Bootstrap b;
  b.token = "t0k";
  b.host_index = 2;
  b.host_name = "node3";
  b.rendezvous = {"10.0.0.1:5000", "192.168.1.1:5000"};
  b.verbose = true;
  b.connect_timeout = absl::Milliseconds(2500);
  b.probe = false;
  b.tls_ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\nend\n-----END CERTIFICATE-----\n";
  b.tls_name = "hvd-rendezvous";
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::string text = SerializeBootstrap(b);
  ASSERT_EQ(write(p[1], text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
  auto got = ReadBootstrap(p[0], absl::Seconds(5));
  close(p[0]);
  close(p[1]);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->token, "t0k");
  EXPECT_EQ(got->host_index, 2);
  EXPECT_EQ(got->host_name, "node3");
  EXPECT_THAT(got->rendezvous, ElementsAre("10.0.0.1:5000", "192.168.1.1:5000"));
  EXPECT_TRUE(got->verbose);
  EXPECT_EQ(got->connect_timeout, absl::Milliseconds(2500));
  EXPECT_FALSE(got->probe);
  EXPECT_EQ(got->tls_ca_pem, b.tls_ca_pem) << "multi-line PEM, even an \"end\" line";
  EXPECT_EQ(got->tls_name, "hvd-rendezvous");
  b.probe = true;
  auto probing = ParseBootstrap(SerializeBootstrap(b));
  ASSERT_TRUE(probing.ok()) << probing.status();
  EXPECT_TRUE(probing->probe);
}

TEST(Bootstrap, ALaunchTreeOfThousandsOfHostsRoundTrips) {
  Bootstrap b;
  b.token = "t0k";
  b.rendezvous = {"10.0.0.1:5000"};
  b.agent_path = "/opt/hvd/bin/hvd-agent";
  b.ssh_port = 2222;
  b.ssh_identity_file = "/home/u/.ssh/id_ed25519";
  b.ssh_config_file = "/home/u/.ssh/config";
  for (int h = 1; h <= 5000; ++h) {
    b.below.push_back({h, h / 2 - 1, absl::StrCat("node-", h, ".cluster")});
  }
  const std::string text = SerializeBootstrap(b);
  ASSERT_GT(text.size(), size_t{100000});  // more than a pipe holds
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::thread writer([&] {
    EXPECT_EQ(write(p[1], text.data(), text.size()),
              static_cast<ssize_t>(text.size()));
  });
  auto got = ReadBootstrap(p[0], absl::Seconds(5));
  writer.join();
  close(p[0]);
  close(p[1]);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->agent_path, "/opt/hvd/bin/hvd-agent");
  EXPECT_EQ(got->ssh_port, 2222);
  EXPECT_EQ(got->ssh_identity_file, "/home/u/.ssh/id_ed25519");
  EXPECT_EQ(got->ssh_config_file, "/home/u/.ssh/config");
  ASSERT_EQ(got->below.size(), 5000u);
  EXPECT_EQ(got->below[4999].index, 5000);
  EXPECT_EQ(got->below[4999].parent, 2499);
  EXPECT_EQ(got->below[4999].name, "node-5000.cluster");
}

TEST(Bootstrap, ABadBelowLineIsRefused) {
  EXPECT_FALSE(ParseBootstrap("hvd-agent-bootstrap 1\ntoken t\nrendezvous "
                              "a:1\nbelow 3 x h\nend\n").ok());
  EXPECT_FALSE(ParseBootstrap("hvd-agent-bootstrap 1\ntoken t\nrendezvous "
                              "a:1\nbelow 3 1\nend\n").ok());
}

TEST(Bootstrap, NothingArrivesTimesOut) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  auto got = ReadBootstrap(p[0], absl::Milliseconds(100));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(), HasSubstr("no bootstrap on stdin"));
  close(p[0]);
  close(p[1]);
}

TEST(Bootstrap, StreamEndsEarly) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(write(p[1], "hvd-agent-bootstrap 1\ntoken x\n", 30), 30);
  close(p[1]);
  auto got = ReadBootstrap(p[0], absl::Seconds(5));
  EXPECT_THAT(got.status().message(), HasSubstr("stdin ended"));
  close(p[0]);
}

TEST(Bootstrap, WrongMagic) {
  EXPECT_THAT(ParseBootstrap("hello\nend\n").status().message(),
              HasSubstr("not an hvd-agent bootstrap"));
}

}  // namespace
}  // namespace host
}  // namespace hvd
