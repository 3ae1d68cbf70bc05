// The agent's decisions by the fake clock (host/fake_os.h): a fake launcher,
// an AgentService on 127.0.0.1 driven by the test, talks to a real Agent whose
// workers are fake processes, so kill graces and heartbeat timeouts take no
// real time. Each test moves the clock only while the agent waits, so what
// the agent did at each time is exact.
#include "agent/agent.h"

#include <signal.h>

#include <deque>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "host/fake_os.h"

namespace hvd {
namespace agent {
namespace {

using launcher::AgentMessage;
using launcher::LauncherMessage;
using SentSignal = host::FakeOs::SentSignal;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// How long, in real time, the test waits for the agent to do something.
constexpr absl::Duration kPatience = absl::Seconds(10);

// The launcher's end of one agent's stream.
class FakeLauncher final : public launcher::AgentService::Service {
 public:
  grpc::Status Attach(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<LauncherMessage, AgentMessage>*
                          stream) override {
    {
      absl::MutexLock lock(&mu_);
      stream_ = stream;
    }
    AgentMessage m;
    while (stream->Read(&m)) {
      absl::MutexLock lock(&mu_);
      inbox_.push_back(m);
    }
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
    ended_ = true;
    return grpc::Status::OK;
  }

  // Writes `m` to the agent once it has attached.
  bool Send(const LauncherMessage& m) {
    absl::MutexLock lock(&mu_);
    auto attached = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stream_ != nullptr || ended_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&attached), kPatience);
    return stream_ != nullptr && stream_->Write(m);
  }

  // The agent's next message of `kind`, dropping those before it of other
  // kinds. False if none comes.
  bool Next(AgentMessage::KindCase kind, AgentMessage* out) {
    absl::MutexLock lock(&mu_);
    auto arrived = [this, kind]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const AgentMessage& m : inbox_) {
        if (m.kind_case() == kind) return true;
      }
      return ended_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&arrived), kPatience);
    while (!inbox_.empty()) {
      AgentMessage m = std::move(inbox_.front());
      inbox_.pop_front();
      if (m.kind_case() == kind) {
        *out = std::move(m);
        return true;
      }
    }
    return false;
  }

  // Whether the agent has closed or cancelled its stream.
  bool AwaitEnd() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&ended_), kPatience);
  }

 private:
  absl::Mutex mu_;
  grpc::ServerReaderWriter<LauncherMessage, AgentMessage>* stream_
      ABSL_GUARDED_BY(mu_) = nullptr;
  std::deque<AgentMessage> inbox_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&launcher_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  void TearDown() override {
    if (exit_code_.valid() && exit_code_.wait_for(std::chrono::seconds(0)) !=
                                  std::future_status::ready) {
      agent_->Signal(SIGTERM);  // a failed test must not leave Run behind
    }
    if (exit_code_.valid()) exit_code_.get();
    agent_.reset();
    server_->Shutdown();
  }

  // Runs an agent for host "h0" on a thread of its own.
  void StartAgent(std::vector<std::string> rendezvous) {
    AgentOptions o;
    o.rendezvous = std::move(rendezvous);
    o.token = "test-token";
    o.host_index = 0;
    o.hostname = "h0";
    agent_ = std::make_unique<Agent>(o, &os_, /*reaper=*/nullptr);
    exit_code_ =
        std::async(std::launch::async, [this] { return agent_->Run(); });
  }

  // Starts the agent and welcomes it into the job with these settings; on
  // return the agent serves the job, with the clock where it started.
  void Join(absl::Duration heartbeat_interval, absl::Duration heartbeat_timeout,
            absl::Duration kill_grace) {
    StartAgent({absl::StrCat("127.0.0.1:", port_)});
    AgentMessage hello;
    ASSERT_TRUE(launcher_.Next(AgentMessage::kHello, &hello));
    LauncherMessage m;
    launcher::Welcome* w = m.mutable_welcome();
    w->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(heartbeat_interval));
    w->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(heartbeat_timeout));
    w->set_kill_grace_ms(absl::ToInt64Milliseconds(kill_grace));
    ASSERT_TRUE(launcher_.Send(m));
    AwaitHandled();
  }

  // Launches the job's only worker (rank 0); its pid, which is its group.
  pid_t LaunchWorker() {
    LauncherMessage m;
    launcher::LaunchSpec* spec = m.mutable_launch();
    spec->add_command("train");
    spec->set_hostname("h0");
    spec->set_size(1);
    launcher::WorkerSpec* w = spec->add_workers();
    w->set_local_size(1);
    w->set_cross_size(1);
    EXPECT_TRUE(launcher_.Send(m));
    AgentMessage started;
    EXPECT_TRUE(launcher_.Next(AgentMessage::kStarted, &started));
    return started.started().pid();
  }

  // Moves the clock by `d` and waits for the agent's next heartbeat: the
  // agent has then looked at the clock since it moved, and acted on what it
  // saw (a kill is due at the same look as a heartbeat).
  void AdvanceAndAwaitHeartbeat(absl::Duration d) {
    os_.Advance(d);
    AgentMessage m;
    ASSERT_TRUE(launcher_.Next(AgentMessage::kHeartbeat, &m));
  }

  // Asks for a probe (of a port that refuses at once) and waits for its
  // result: the agent has then handled every message sent before.
  void AwaitHandled() {
    LauncherMessage m;
    launcher::ProbeTarget* t = m.mutable_probe()->add_targets();
    t->set_address("127.0.0.1");
    t->set_port(1);
    m.mutable_probe()->set_timeout_ms(1000);
    ASSERT_TRUE(launcher_.Send(m));
    AgentMessage result;
    ASSERT_TRUE(launcher_.Next(AgentMessage::kProbeResult, &result));
  }

  void SendShutdown(int exit_code) {
    LauncherMessage m;
    m.mutable_shutdown()->set_exit_code(exit_code);
    ASSERT_TRUE(launcher_.Send(m));
  }

  // Run's return value; -1 if it does not return.
  int AwaitExit() {
    if (exit_code_.wait_for(absl::ToChronoSeconds(kPatience)) !=
        std::future_status::ready) {
      return -1;
    }
    return exit_code_.get();
  }

  host::FakeOs os_;  // outlives the agent and its workers
  const absl::Time t0_ = os_.Now();
  FakeLauncher launcher_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<Agent> agent_;
  std::future<int> exit_code_;
};

TEST_F(AgentTest, SilenceBeyondTheHeartbeatTimeoutEndsTheWorkers) {
  os_.IgnoreSignal(SIGTERM);  // the worker outlasts SIGTERM
  Join(absl::Milliseconds(100), absl::Seconds(1), absl::Seconds(2));
  const pid_t worker = LaunchWorker();
  ::testing::internal::CaptureStderr();
  os_.Advance(absl::Milliseconds(1001));
  const int code = AwaitExit();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_THAT(log, HasSubstr(absl::StrCat(
                       "hvd-agent h0: no word from the launcher at 127.0.0.1:",
                       port_, " for 1.001s; ending 1 workers")));
  const absl::Time lost = t0_ + absl::Milliseconds(1001);
  EXPECT_THAT(
      os_.signals(),
      ElementsAre(SentSignal{lost, worker, true, SIGTERM},
                  SentSignal{lost + absl::Seconds(2), worker, true, SIGKILL}));
  EXPECT_TRUE(launcher_.AwaitEnd());
}

TEST_F(AgentTest, AnyWordFromTheLauncherRestartsTheSilence) {
  Join(absl::Milliseconds(10), absl::Seconds(1), absl::Seconds(2));
  os_.Advance(absl::Milliseconds(600));
  LaunchWorker();  // heard at t0 + 600 ms
  AdvanceAndAwaitHeartbeat(absl::Milliseconds(500));
  // The agent has now checked at t0 + 1100 ms or later: past the timeout
  // since the Welcome, within it since the launch.
  AdvanceAndAwaitHeartbeat(absl::Milliseconds(400));
  EXPECT_THAT(os_.signals(), SizeIs(0));
  SendShutdown(0);
  EXPECT_EQ(AwaitExit(), 0);
}

TEST_F(AgentTest, TerminateEscalatesToSigkillOneKillGraceLater) {
  os_.IgnoreSignal(SIGTERM);
  Join(absl::Milliseconds(10), absl::Seconds(60), absl::Seconds(2));
  const pid_t worker = LaunchWorker();
  LauncherMessage terminate;
  terminate.mutable_terminate()->set_reason("rank 1 exited with code 1");
  ASSERT_TRUE(launcher_.Send(terminate));
  AwaitHandled();
  ASSERT_THAT(os_.signals(), SizeIs(1));
  AdvanceAndAwaitHeartbeat(absl::Milliseconds(1999));
  EXPECT_THAT(os_.signals(), SizeIs(1));  // not yet
  os_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(os_.AwaitSignals(2, kPatience));
  EXPECT_THAT(os_.signals(), ElementsAre(SentSignal{t0_, worker, true, SIGTERM},
                                         SentSignal{t0_ + absl::Seconds(2),
                                                    worker, true, SIGKILL}));
  AgentMessage exit;
  ASSERT_TRUE(launcher_.Next(AgentMessage::kExit, &exit));
  EXPECT_EQ(exit.exit().rank(), 0);
  EXPECT_EQ(exit.exit().signal(), SIGKILL);
  SendShutdown(3);
  EXPECT_EQ(AwaitExit(), 3);
}

TEST_F(AgentTest, AStoppedWorkerIsReportedAndSoIsItsContinuing) {
  Join(absl::Milliseconds(10), absl::Seconds(60), absl::Seconds(2));
  const pid_t worker = LaunchWorker();
  ASSERT_TRUE(os_.Signal(worker, SIGSTOP).ok());  // as `kill -STOP` would
  os_.Advance(absl::Seconds(1));  // the first heartbeat is a second in
  AgentMessage stopped;
  ASSERT_TRUE(launcher_.Next(AgentMessage::kStopped, &stopped));
  EXPECT_EQ(stopped.stopped().rank(), 0);
  EXPECT_TRUE(stopped.stopped().stopped());
  ASSERT_TRUE(os_.Signal(worker, SIGCONT).ok());
  os_.Advance(absl::Milliseconds(10));
  AgentMessage continued;
  ASSERT_TRUE(launcher_.Next(AgentMessage::kStopped, &continued));
  EXPECT_FALSE(continued.stopped().stopped());
  SendShutdown(0);
  EXPECT_EQ(AwaitExit(), 0);
}

TEST_F(AgentTest, SignalEndsTheWorkersAndExits128PlusIt) {
  Join(absl::Milliseconds(10), absl::Seconds(60), absl::Seconds(2));
  const pid_t worker = LaunchWorker();
  agent_->Signal(SIGINT);
  EXPECT_EQ(AwaitExit(), 128 + SIGINT);
  EXPECT_THAT(os_.signals(),
              ElementsAre(SentSignal{t0_, worker, true, SIGTERM}));
}

TEST_F(AgentTest, GivesUpOnAnUnreachableRendezvousAtTheConnectTimeout) {
  StartAgent({"127.0.0.1:1"});  // refused at once
  EXPECT_EQ(AwaitExit(), 1);
  // The default connect timeout, tried every 250 ms by the fake clock.
  EXPECT_EQ(os_.Now(), t0_ + AgentOptions().connect_timeout);
}

}  // namespace
}  // namespace agent
}  // namespace hvd
