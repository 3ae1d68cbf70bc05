#include "launcher/options.h"

#include <fstream>

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

TEST(ParseCommandLine, MetricsPortAndLinger) {
  for (const char* port : {"0", "65536", "x"}) {
    EXPECT_EQ(Parse({"--metrics-port", port, "true"}).status().message(),
              absl::StrCat("invalid value '", port,
                           "' for --metrics-port: expected an integer from 1 "
                           "to 65535"));
  }
  auto o = Parse({"--metrics-port", "9090", "--metrics-linger-seconds", "30",
                  "true"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->metrics_port, 9090);
  EXPECT_EQ(o->metrics_linger, absl::Seconds(30));
  EXPECT_FALSE(Parse({"--metrics-linger-seconds", "-1", "true"}).ok());
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
  EXPECT_EQ(o->no_stall_check, true);
  EXPECT_EQ(o->hierarchical_allreduce, true);
  EXPECT_EQ(o->stall_check_warning_time_seconds, 9);
  EXPECT_EQ(o->stall_check_shutdown_time_seconds, 20);
}

TEST(ParseCommandLine, AutotuneAndItsSettings) {
  auto o = Parse({"--autotune", "--autotune-log-file", "t.csv",
                  "--autotune-warmup-samples", "0",
                  "--autotune-steps-per-sample", "4",
                  "--autotune-bayes-opt-max-samples", "9",
                  "--autotune-gaussian-process-noise", "0.3", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->autotune, true);
  EXPECT_EQ(o->autotune_log_file, "t.csv");
  EXPECT_EQ(o->autotune_warmup_samples, 0);
  EXPECT_EQ(o->autotune_steps_per_sample, 4);
  EXPECT_EQ(o->autotune_max_samples, 9);
  EXPECT_EQ(o->autotune_noise, 0.3);
  EXPECT_TRUE(o->notes.empty());
  EXPECT_THAT(Parse({"--autotune-steps-per-sample", "0", "p"}).status().message(),
              HasSubstr("--autotune-steps-per-sample"));
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

// Every flag horovodrun 0.28 accepts, with a value where it takes one.
const std::vector<std::vector<std::string>>& HorovodrunFlags() {
  static const auto* flags = new std::vector<std::vector<std::string>>{
      {"-np", "2"}, {"--num-proc", "2"}, {"--disable-cache"},
      {"--start-timeout", "30"}, {"--network-interfaces", "lo"},
      {"--network-interface", "lo"}, {"--output-filename", "/tmp/o"},
      {"--verbose"}, {"--config-file", "/dev/null"}, {"-p", "22"},
      {"--ssh-port", "22"}, {"-i", "/k"}, {"--ssh-identity-file", "/k"},
      {"--fusion-threshold-mb", "64"}, {"--cycle-time-ms", "5"},
      {"--cache-capacity", "1024"}, {"--hierarchical-allreduce"},
      {"--no-hierarchical-allreduce"}, {"--hierarchical-allgather"},
      {"--no-hierarchical-allgather"}, {"--torus-allreduce"},
      {"--no-torus-allreduce"}, {"--autotune"}, {"--no-autotune"},
      {"--autotune-log-file", "a.csv"}, {"--autotune-warmup-samples", "3"},
      {"--autotune-steps-per-sample", "10"},
      {"--autotune-bayes-opt-max-samples", "20"},
      {"--autotune-gaussian-process-noise", "0.8"}, {"--max-np", "4"},
      {"--max-num-proc", "4"}, {"--slots-per-host", "2"},
      {"--elastic-timeout", "600"}, {"--reset-limit", "3"},
      {"--blacklist-cooldown-range", "10", "100"},
      {"--timeline-filename", "/t.json"}, {"--timeline-mark-cycles"},
      {"--no-timeline-mark-cycles"}, {"--no-stall-check"}, {"--stall-check"},
      {"--stall-check-warning-time-seconds", "60"},
      {"--stall-check-shutdown-time-seconds", "0"}, {"--mpi-threads-disable"},
      {"--no-mpi-threads-disable"}, {"--mpi-args=--bind-to none"}, {"--tcp"},
      {"--binding-args", "--bind-to none"}, {"--num-nccl-streams", "2"},
      {"--thread-affinity", "1"}, {"--gloo-timeout-seconds", "30"},
      {"--log-level", "INFO"}, {"--log-with-timestamp"},
      {"--log-without-timestamp"}, {"-prefix-timestamp"},
      {"--prefix-output-with-timestamp"}, {"--log-hide-timestamp"},
      {"--no-log-hide-timestamp"}, {"-H", "localhost:2"},
      {"--hosts", "localhost:2"}, {"-hostfile", "/h"}, {"--hostfile", "/h"},
      {"--gloo"}, {"--mpi"}, {"--jsrun"}, {"-v"}, {"--version"}, {"-h"},
      {"--help"}};
  return *flags;
}

TEST(ParseCommandLine, EveryHorovodrunFlagIsAccepted) {
  for (const auto& flag : HorovodrunFlags()) {
    std::vector<std::string> args = flag;
    args.push_back("python");
    auto o = Parse(args);
    EXPECT_TRUE(o.ok()) << flag[0] << ": " << o.status();
  }
}

TEST(ParseCommandLine, FlagsWithNoMeaningHereSayWhyAndTheJobGoesOn) {
  auto o = Parse({"-np", "2", "--gloo", "--disable-cache",
                  "--mpi-args=--bind-to none", "--thread-affinity", "1",
                  "--no-torus-allreduce=x", "p"});
  EXPECT_THAT(o.status().message(), HasSubstr("takes no value"));
  o = Parse({"-np", "2", "--gloo", "--disable-cache",
             "--mpi-args=--bind-to none", "--no-torus-allreduce", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(ValidateOptions(*o).ok());
  EXPECT_THAT(
      o->notes,
      ElementsAre(HasSubstr("--gloo: hvd has one controller"),
                  HasSubstr("--disable-cache: hvdrun keeps no cache"),
                  "--mpi-args: hvd does not use MPI (--bind-to none); "
                  "ignored"));
}

TEST(ParseCommandLine, NoFormsAreKeptSoTheyOverrideTheEnvironment) {
  auto o = Parse({"--no-hierarchical-allreduce", "--stall-check",
                  "--no-timeline-mark-cycles", "--log-with-timestamp", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->hierarchical_allreduce, false);
  EXPECT_EQ(o->no_stall_check, false);
  EXPECT_EQ(o->timeline_mark_cycles, false);
  EXPECT_EQ(o->log_hide_timestamp, false);
  EXPECT_EQ(Parse({"--log-hide-timestamp", "p"})->log_hide_timestamp, true);
  EXPECT_FALSE(o->hierarchical_allgather.has_value());
}

TEST(ParseCommandLine, AFlagAndItsNoFormTogetherAreRefused) {
  auto o = Parse({"--hierarchical-allreduce", "--no-hierarchical-allreduce",
                  "p"});
  EXPECT_EQ(o.status().message(),
            "flag --no-hierarchical-allreduce given more than once");
}

TEST(ParseCommandLine, TcpMeansTcpEverywhereAndNotesTheOneController) {
  auto o = Parse({"--tcp", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->transport, "tcp");
  EXPECT_TRUE(o->nccl_ib_disable);
  EXPECT_THAT(o->notes, ElementsAre(HasSubstr("hvd has one controller")));
  EXPECT_THAT(Parse({"--transport", "rdma", "--tcp", "p"}).status().message(),
              HasSubstr("--tcp and --transport rdma disagree"));
}

TEST(ParseCommandLine, RepeatedNetworkInterfaceFlagsAreUnited) {
  auto o = Parse({"--network-interface", "eth0", "--network-interface",
                  "ib0,eth0", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->network_interfaces, ElementsAre("eth0", "ib0"));
}

TEST(ParseCommandLine, CooldownRangeTakesTwoOrderedValues) {
  auto o = Parse({"--blacklist-cooldown-range", "10", "100", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->elastic.cooldown_min_s, 10);
  EXPECT_EQ(o->elastic.cooldown_max_s, 100);
  EXPECT_THAT(o->notes, ElementsAre(HasSubstr("apply to elastic jobs")));
  EXPECT_THAT(Parse({"--blacklist-cooldown-range", "100", "10", "p"})
                  .status()
                  .message(),
              HasSubstr("expected MIN no larger than MAX"));
  EXPECT_THAT(Parse({"--blacklist-cooldown-range", "0", "10", "p"})
                  .status()
                  .message(),
              HasSubstr("an integer from 1 to 3600"));
  EXPECT_THAT(Parse({"--blacklist-cooldown-range", "10"}).status().message(),
              HasSubstr("needs two values"));
}

TEST(ValidateOptions, ElasticFlagsAreCheckedAgainstEachOther) {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::string not_exec = absl::StrCat(getenv("TEST_TMPDIR"), "/d.sh");
  std::ofstream(not_exec) << "echo h1\n";
  std::vector<Case> cases = {
      {{"--min-np", "3", "--max-np", "2", "-H", "a:4", "p"},
       "--min-np 3 is larger than --max-np 2"},
      {{"--min-np", "3", "-np", "2", "-H", "a:4", "p"},
       "--min-np 3 is larger than -np 2"},
      {{"--min-np", "1", "-np", "3", "--max-np", "2", "-H", "a:4", "p"},
       "-np 3 is larger than --max-np 2"},
      {{"--min-np", "1", "p"}, "--min-np needs hosts"},
      {{"--host-discovery-script", "/nonexistent/d.sh", "p"}, "no such file"},
      {{"--host-discovery-script", not_exec, "p"}, "not executable"},
      {{"--host-discovery-script", not_exec, "-H", "a", "p"},
       "not both"},
      {{"--min-np", "1", "-np", "2", "--rendezvous-only"},
       "--rendezvous-only cannot run an elastic job"},
  };
  for (const Case& c : cases) {
    auto o = Parse(c.args);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_THAT(ValidateOptions(*o).message(), HasSubstr(c.error));
  }
  auto ok = Parse({"--min-np", "1", "-np", "2", "-H", "a:2", "p"});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ValidateOptions(*ok).ok());
  EXPECT_TRUE(IsElastic(*ok));
}

std::string WriteConfig(const std::string& name, const std::string& text) {
  std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << text;
  return path;
}

// Horovod's own example of the format.
constexpr char kHorovodConfig[] = R"(controller: gloo

params:
  fusion_threshold_mb: 32
  cycle_time_ms: 10
  cache_capacity: 2048
  hierarchical_allreduce: true

autotune:
  enabled: false
  log_file: 'horovod_autotune_log.txt'

timeline:
  filename: 'horovod_timeline.json'
  mark_cycles: true

stall_check:
  enabled: false
  warning_time_seconds: 120
  shutdown_time_seconds: 240

library_options:
  gloo_timeout_seconds: 60

logging:
  level: INFO
  with_timestamp: false
)";

TEST(ConfigFile, SetsWhatItsKeysStandFor) {
  auto o = Parse({"-np", "2", "--config-file",
                  WriteConfig("h.yaml", kHorovodConfig), "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->fusion_threshold_mb, 32);
  EXPECT_EQ(o->cycle_time_ms, 10);
  EXPECT_EQ(o->cache_capacity, 2048);
  EXPECT_EQ(o->hierarchical_allreduce, true);
  EXPECT_EQ(o->timeline_filename, "horovod_timeline.json");
  EXPECT_EQ(o->timeline_mark_cycles, true);
  EXPECT_EQ(o->no_stall_check, true);
  EXPECT_EQ(o->stall_check_warning_time_seconds, 120);
  EXPECT_EQ(o->stall_check_shutdown_time_seconds, 240);
  EXPECT_EQ(o->timeout_seconds, 60);
  EXPECT_EQ(o->log_level, "info");
  EXPECT_EQ(o->log_hide_timestamp, true);
  EXPECT_EQ(o->autotune, false);
  EXPECT_EQ(o->autotune_log_file, "horovod_autotune_log.txt");
  EXPECT_THAT(o->notes, ElementsAre(HasSubstr("--gloo: hvd has one")));
}

TEST(ConfigFile, TheCommandLineWins) {
  auto o = Parse({"--fusion-threshold-mb", "256", "--config-file",
                  WriteConfig("h.yaml", kHorovodConfig), "--stall-check",
                  "--mpi", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->fusion_threshold_mb, 256);
  EXPECT_EQ(o->no_stall_check, false);
  EXPECT_EQ(o->cycle_time_ms, 10);
  EXPECT_THAT(o->notes, ElementsAre(HasSubstr("--mpi: hvd has one")));
}

TEST(ConfigFile, BadContentIsNamedWithFileAndKey) {
  const std::string bad_value =
      WriteConfig("v.yaml", "params:\n  cycle_time_ms: fast\n");
  EXPECT_EQ(Parse({"--config-file", bad_value, "p"}).status().message(),
            absl::StrCat("--config-file ", bad_value,
                         ": params.cycle_time_ms: invalid value 'fast' for "
                         "--cycle-time-ms: expected a non-negative number"));
  const std::string bad_switch =
      WriteConfig("s.yaml", "timeline:\n  mark_cycles: maybe\n");
  EXPECT_THAT(Parse({"--config-file", bad_switch, "p"}).status().message(),
              HasSubstr("timeline.mark_cycles: expected true or false, got "
                        "'maybe'"));
  EXPECT_THAT(Parse({"--config-file", WriteConfig("c.yaml", "controller: x\n"),
                     "p"})
                  .status()
                  .message(),
              HasSubstr("controller: expected gloo or mpi, got 'x'"));
  EXPECT_THAT(Parse({"--config-file", WriteConfig("y.yaml", "params: [1,\n"),
                     "p"})
                  .status()
                  .message(),
              HasSubstr("not YAML"));
  EXPECT_THAT(Parse({"--config-file", "/nonexistent.yaml", "p"})
                  .status()
                  .message(),
              HasSubstr("/nonexistent.yaml: cannot read the file"));
}

TEST(ConfigFile, UnknownKeysAreNotedAndSkippedAsHorovodSkipsThem) {
  auto o = Parse({"--config-file",
                  WriteConfig("u.yaml",
                              "params:\n  cycle_time_msec: 3\nextra: 1\n"),
                  "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->cycle_time_ms.has_value());
  EXPECT_THAT(o->notes,
              ElementsAre(HasSubstr("unknown key params.cycle_time_msec"),
                          HasSubstr("unknown section extra")));
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

TEST(ValidateOptions, LaunchFanoutIsForJobsHvdrunStartsOverSsh) {
  auto o = Parse({"--launch-fanout", "8", "-H", "a:1,b:1", "p"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launch_fanout, 8);
  EXPECT_TRUE(ValidateOptions(*o).ok());
  for (const char* bad : {"0", "-1", "x", "2.5"}) {
    auto b = Parse({"--launch-fanout", bad, "-H", "a:1", "p"});
    EXPECT_THAT(b.status().message(),
                HasSubstr("for --launch-fanout: expected an integer from 1"))
        << bad;
  }
  auto elastic =
      Parse({"--launch-fanout", "2", "--min-np", "1", "-H", "a:1", "p"});
  ASSERT_TRUE(elastic.ok());
  EXPECT_THAT(ValidateOptions(*elastic).message(),
              HasSubstr("--launch-fanout does not apply to an elastic job"));
  auto orchestrated =
      Parse({"--launch-fanout", "2", "--rendezvous-only", "-np", "2"});
  ASSERT_TRUE(orchestrated.ok());
  EXPECT_THAT(ValidateOptions(*orchestrated).message(),
              HasSubstr("with --rendezvous-only the agents join by "
                        "themselves"));
  auto in_slurm = Parse({"--launch-fanout", "2", "-np", "2", "p"});
  ASSERT_TRUE(in_slurm.ok());
  in_slurm->slurm = SlurmAllocation{};
  EXPECT_THAT(ValidateOptions(*in_slurm).message(),
              HasSubstr("in a Slurm allocation srun starts them"));
}

TEST(ValidateOptions, HelpAndVersionNeedNothingElse) {
  EXPECT_TRUE(ValidateOptions(*Parse({"--help"})).ok());
  EXPECT_TRUE(ValidateOptions(*Parse({"--version"})).ok());
}

TEST(HelpText, NamesExcludedVariables) {
  EXPECT_THAT(HelpText(), HasSubstr("SSH_*"));
  EXPECT_THAT(HelpText(), HasSubstr("HOSTNAME"));
  EXPECT_THAT(HelpText(), HasSubstr("--rendezvous-only"));
  EXPECT_THAT(HelpText(), HasSubstr("in a Slurm allocation its nodes"));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
