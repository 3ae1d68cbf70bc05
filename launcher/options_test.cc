#include "launcher/options.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Options> Parse(std::vector<std::string> args) {
  return ParseCommandLine(args);
}

TEST(ParseCommandLine, HorovodSpellings) {
  auto o = Parse({"-np", "4", "-H", "a:2,b:2", "-p", "2222", "-i", "/k",
                  "--start-timeout", "5", "--verbose", "python", "t.py"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->num_proc, 4);
  EXPECT_EQ(o->hosts, "a:2,b:2");
  EXPECT_EQ(o->ssh_port, 2222);
  EXPECT_EQ(o->ssh_identity_file, "/k");
  EXPECT_EQ(o->start_timeout, absl::Seconds(5));
  EXPECT_TRUE(o->verbose);
  EXPECT_THAT(o->command, ElementsAre("python", "t.py"));
}

TEST(ParseCommandLine, SshPortOutsideOneTo65535IsRefused) {
  for (const char* port : {"0", "65536", "99999", "-1"}) {
    auto o = Parse({"-p", port, "-H", "localhost:2", "true"});
    EXPECT_EQ(o.status().message(),
              absl::StrCat("invalid value '", port,
                           "' for --ssh-port: expected an integer from 1 to "
                           "65535"));
  }
  EXPECT_EQ(Parse({"-p", "65535", "true"})->ssh_port, 65535);
}

TEST(ParseCommandLine, LongFormsWithEquals) {
  auto o = Parse({"--num-proc=3", "--hosts=a:3", "--network-interfaces=eth0,eth1",
                  "prog"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->num_proc, 3);
  EXPECT_THAT(o->network_interfaces, ElementsAre("eth0", "eth1"));
}

TEST(ParseCommandLine, CommandKeepsItsOwnFlags) {
  auto o = Parse({"-np", "2", "python", "train.py", "-np", "9", "--lr=0.1",
                  "--verbose"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->verbose);
  EXPECT_THAT(o->command,
              ElementsAre("python", "train.py", "-np", "9", "--lr=0.1",
                          "--verbose"));
}

TEST(ParseCommandLine, DoubleDashEndsFlags) {
  auto o = Parse({"-np", "1", "--", "--weird-program"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->command, ElementsAre("--weird-program"));
}

TEST(ParseCommandLine, EnvFlagAccumulates) {
  auto o = Parse({"-x", "A", "--env", "B=1=2", "-x=C=", "prog"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->env, ElementsAre("A", "B=1=2", "C="));
}

TEST(ParseCommandLine, Tunables) {
  auto o = Parse({"--fusion-threshold-mb", "32", "--cycle-time-ms", "2.5",
                  "--cache-capacity", "0", "--timeline-filename", "/t.json",
                  "--no-stall-check", "--hierarchical-allreduce", "--stall-check-warning-time-seconds", "9",
                  "--stall-check-shutdown-time-seconds", "20", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->fusion_threshold_mb, 32);
  EXPECT_EQ(o->cycle_time_ms, 2.5);
  EXPECT_EQ(o->cache_capacity, 0);
  EXPECT_EQ(o->timeline_filename, "/t.json");
  EXPECT_TRUE(o->no_stall_check);
  EXPECT_TRUE(o->hierarchical_allreduce);
  EXPECT_EQ(o->stall_check_warning_time_seconds, 9);
  EXPECT_EQ(o->stall_check_shutdown_time_seconds, 20);
}

TEST(ParseCommandLine, UnknownFlag) {
  auto o = Parse({"-np", "2", "--frobnicate", "prog"});
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(o.status().message(), HasSubstr("unknown flag '--frobnicate'"));
}

TEST(ParseCommandLine, MissingValue) {
  auto o = Parse({"-np"});
  EXPECT_THAT(o.status().message(), HasSubstr("flag -np needs a value"));
}

TEST(ParseCommandLine, NonNumericNp) {
  auto o = Parse({"-np", "four", "prog"});
  EXPECT_THAT(o.status().message(),
              HasSubstr("invalid value 'four' for -np: expected a positive"));
}

TEST(ParseCommandLine, ZeroAndNegativeNp) {
  EXPECT_THAT(Parse({"-np", "0", "p"}).status().message(),
              HasSubstr("invalid value '0' for -np"));
  EXPECT_THAT(Parse({"-np", "-3", "p"}).status().message(),
              HasSubstr("invalid value '-3' for -np"));
}

TEST(ParseCommandLine, FlagGivenTwice) {
  auto o = Parse({"-np", "2", "--num-proc", "3", "p"});
  EXPECT_THAT(o.status().message(), HasSubstr("given more than once"));
}

TEST(ParseCommandLine, BadLogLevel) {
  auto o = Parse({"--log-level", "loud", "p"});
  EXPECT_THAT(o.status().message(), HasSubstr("for --log-level"));
}

TEST(ParseCommandLine, TransportTakesAutoRdmaOrTcp) {
  auto o = Parse({"--transport", "RDMA", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->transport, "rdma");
  auto bad = Parse({"--transport", "ib", "p"});
  EXPECT_THAT(bad.status().message(), HasSubstr("for --transport"));
}

TEST(ParseCommandLine, BadEnvName) {
  auto o = Parse({"-x", "1ABC=2", "p"});
  EXPECT_THAT(o.status().message(), HasSubstr("for -x: expected NAME"));
}

TEST(ParseCommandLine, BooleanFlagWithValue) {
  auto o = Parse({"--verbose=yes", "p"});
  EXPECT_THAT(o.status().message(), HasSubstr("--verbose takes no value"));
}

TEST(ValidateOptions, NoCommand) {
  auto o = Parse({"-np", "2"});
  ASSERT_TRUE(o.ok());
  EXPECT_THAT(ValidateOptions(*o).message(), HasSubstr("no command given"));
}

TEST(ValidateOptions, HostsAndHostfileTogether) {
  auto o = Parse({"-np", "2", "-H", "a:2", "--hostfile", "f", "p"});
  ASSERT_TRUE(o.ok());
  EXPECT_THAT(ValidateOptions(*o).message(),
              HasSubstr("-H/--hosts and --hostfile cannot be used together"));
}

TEST(ValidateOptions, NpRequiredWithoutHosts) {
  auto o = Parse({"p"});
  ASSERT_TRUE(o.ok());
  EXPECT_THAT(ValidateOptions(*o).message(), HasSubstr("-np is required"));
}

TEST(ValidateOptions, RendezvousOnlyNeedsNpButNoCommand) {
  auto o = Parse({"--rendezvous-only", "--np", "4", "--port", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(ValidateOptions(*o).ok());
  auto bad = Parse({"--rendezvous-only"});
  ASSERT_TRUE(bad.ok());
  EXPECT_THAT(ValidateOptions(*bad).message(), HasSubstr("needs -np"));
}

TEST(ValidateOptions, HelpAndVersionNeedNothingElse) {
  EXPECT_TRUE(ValidateOptions(*Parse({"--help"})).ok());
  EXPECT_TRUE(ValidateOptions(*Parse({"--version"})).ok());
}

TEST(HelpText, NamesExcludedVariables) {
  EXPECT_THAT(HelpText(), HasSubstr("SSH_*"));
  EXPECT_THAT(HelpText(), HasSubstr("HOSTNAME"));
  EXPECT_THAT(HelpText(), HasSubstr("--rendezvous-only"));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
