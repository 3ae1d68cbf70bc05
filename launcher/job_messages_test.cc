#include "launcher/job_messages.h"

#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

WorkerExit Exit(int rank, int code, int signal, const std::string& error = "") {
  WorkerExit e;
  e.set_rank(rank);
  e.set_exit_code(code);
  e.set_signal(signal);
  e.set_start_error(error);
  return e;
}

TEST(WorkerExitFailure, CleanExitIsNoFailure) {
  EXPECT_FALSE(WorkerExitFailure(Exit(0, 0, 0), "h1").has_value());
}

TEST(WorkerExitFailure, NonZeroCodeIsTheJobsCode) {
  std::optional<JobFailure> f = WorkerExitFailure(Exit(3, 7, 0), "h2");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, 7);
  EXPECT_EQ(f->message, "hvdrun: rank 3 (host h2) exited with code 7");
}

TEST(WorkerExitFailure, SignalIs128PlusIt) {
  std::optional<JobFailure> f = WorkerExitFailure(Exit(1, 0, 9), "h1");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, 137);
  EXPECT_EQ(f->message, "hvdrun: rank 1 (host h1) killed by signal 9 (Killed)");
}

TEST(WorkerExitFailure, StartErrorIs127NamingTheError) {
  std::optional<JobFailure> f =
      WorkerExitFailure(Exit(2, 127, 0, "no such program 'trian.py'"), "h1");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, 127);
  EXPECT_EQ(f->message,
            "hvdrun: rank 2 (host h1) could not start: no such program "
            "'trian.py'");
}

TEST(LaunchMessage, AgentsOwnCommandWhenTheJobHasNone) {
  JobConfig config;
  config.np = 2;
  config.env = {{"A", "1"}};
  JobHost host;
  host.name = "h1";
  host.hello.add_command("python");
  host.hello.add_command("train.py");
  host.workers = {WorkerSlot{1, 0, 1, 1, 2}};
  host.data_plane = "10.0.0.1";
  LaunchSpec spec = LaunchMessage(config, host).launch();
  ASSERT_EQ(spec.command_size(), 2);
  EXPECT_EQ(spec.command(1), "train.py");
  EXPECT_EQ(spec.env().at("A"), "1");
  EXPECT_EQ(spec.hostname(), "h1");
  EXPECT_EQ(spec.size(), 2);
  ASSERT_EQ(spec.workers_size(), 1);
  EXPECT_EQ(spec.workers(0).rank(), 1);
  EXPECT_EQ(spec.workers(0).cross_rank(), 1);
  EXPECT_EQ(spec.workers(0).cross_size(), 2);
  EXPECT_EQ(spec.data_plane_address(), "10.0.0.1");
  EXPECT_TRUE(spec.bind_to_cores());  // hvdrun's default

  config.command = {"sh", "-c", "true"};
  config.bind_to_cores = false;
  EXPECT_EQ(LaunchMessage(config, host).launch().command(0), "sh");
  EXPECT_FALSE(LaunchMessage(config, host).launch().bind_to_cores());
}

TEST(WelcomeMessage, CarriesTheJobsTiming) {
  JobConfig config;
  config.heartbeat_interval = absl::Milliseconds(250);
  config.heartbeat_timeout = absl::Seconds(3);
  config.kill_grace = absl::Seconds(2);
  Welcome w = WelcomeMessage(config, 4).welcome();
  EXPECT_EQ(w.host_index(), 4);
  EXPECT_EQ(w.heartbeat_interval_ms(), 250);
  EXPECT_EQ(w.heartbeat_timeout_ms(), 3000);
  EXPECT_EQ(w.kill_grace_ms(), 2000);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
