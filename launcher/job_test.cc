// The job controller over its real gRPC service, hosted by the rendezvous
// server as in hvdrun, with fake agents speaking proto/launcher.proto from
// the test: the protocol and the job's decisions without processes.
#include "launcher/job.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "host/fake_os.h"
#include "core/rendezvous/rendezvous_server.h"
#include "proto/job_token.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "test-token-123";

class FakeAgent {
 public:
  FakeAgent(int port, const std::string& token = kToken) {
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
    stub_ = AgentService::NewStub(channel_);
    context_.AddMetadata(rendezvous::kJobTokenMetadataKey, token);
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(30));
    stream_ = stub_->Attach(&context_);
  }
  bool Hello(int host_index, std::vector<std::pair<std::string, std::string>>
                                 interfaces = {}) {
    AgentMessage m;
    m.mutable_hello()->set_host_index(host_index);
    m.mutable_hello()->set_hostname(absl::StrCat("fake", host_index));
    m.mutable_hello()->set_probe_port(1);
    m.mutable_hello()->set_probe_nonce("n");
    for (const auto& [name, addr] : interfaces) {
      Interface* i = m.mutable_hello()->add_interfaces();
      i->set_name(name);
      i->set_address(addr);
    }
    return stream_->Write(m);
  }
  bool Send(const AgentMessage& m) { return stream_->Write(m); }
  bool Exit(int rank, int code, int signal = 0) {
    AgentMessage m;
    m.mutable_exit()->set_rank(rank);
    m.mutable_exit()->set_exit_code(code);
    m.mutable_exit()->set_signal(signal);
    return Send(m);
  }
  // The next message other than a heartbeat.
  bool Next(LauncherMessage* m) {
    while (stream_->Read(m)) {
      if (m->kind_case() != LauncherMessage::kHeartbeat) return true;
    }
    return false;
  }
  grpc::Status Finish() {
    stream_->WritesDone();
    LauncherMessage m;
    while (stream_->Read(&m)) {
    }
    return stream_->Finish();
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<AgentService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<AgentMessage, LauncherMessage>>
      stream_;
};

class JobTest : public ::testing::Test {
 protected:
  void Start(JobConfig config, host::Os* os = host::RealOs()) {
    out_path_ = absl::StrCat(getenv("TEST_TMPDIR"), "/out.", counter_++);
    fd_ = open(out_path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    sink_ = std::make_unique<OutputSink>(fd_, fd_, "");
    job_ = std::make_unique<Job>(std::move(config), sink_.get(), os);
    RendezvousServerOptions o;
    o.address = "127.0.0.1:0";
    o.token = kToken;
    o.extra_services = {job_.get()};
    server_ = std::make_unique<RendezvousServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    runner_ = std::thread([this] { code_ = job_->Run(); });
  }
  int Wait() {
    runner_.join();
    job_->CloseStreams();
    server_->Shutdown();
    return code_;
  }
  std::string Printed() {
    std::ifstream in(out_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void TearDown() override {
    if (runner_.joinable()) {
      job_->Interrupt(SIGTERM);
      Wait();
    }
    if (fd_ >= 0) close(fd_);
  }
  static JobConfig OneHost(int workers) {
    JobConfig c;
    c.np = workers;
    HostAssignment h;
    h.name = "hostA";
    for (int r = 0; r < workers; ++r) {
      WorkerSlot w;
      w.rank = r;
      w.local_rank = r;
      w.local_size = workers;
      h.workers.push_back(w);
    }
    c.hosts = {h};
    c.command = {"train", "--flag"};
    c.env = {{"FORWARDED", "1"}};
    c.cwd = "/work";
    c.kill_grace = absl::Milliseconds(200);
    c.start_timeout = absl::Seconds(20);
    return c;
  }
  int port() { return server_->port(); }

  std::unique_ptr<OutputSink> sink_;
  std::unique_ptr<Job> job_;
  std::unique_ptr<RendezvousServer> server_;
  std::thread runner_;
  int code_ = -1;
  int fd_ = -1;
  std::string out_path_;
  static inline int counter_ = 0;
};

TEST_F(JobTest, CleanJobSpecOutputAndShutdown) {
  Start(OneHost(2));
  FakeAgent agent(port());
  ASSERT_TRUE(agent.Hello(0));
  LauncherMessage m;
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kWelcome);
  EXPECT_EQ(m.welcome().kill_grace_ms(), 200);
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kLaunch);
  const LaunchSpec& spec = m.launch();
  EXPECT_THAT(spec.command(), ElementsAre("train", "--flag"));
  EXPECT_EQ(spec.env().at("FORWARDED"), "1");
  EXPECT_EQ(spec.cwd(), "/work");
  EXPECT_EQ(spec.hostname(), "hostA");
  EXPECT_EQ(spec.size(), 2);
  EXPECT_EQ(spec.data_plane_address(), "127.0.0.1");
  ASSERT_EQ(spec.workers_size(), 2);
  EXPECT_EQ(spec.workers(1).rank(), 1);
  AgentMessage out;
  out.mutable_output()->set_rank(1);
  out.mutable_output()->set_data("hello\nworld\n");
  ASSERT_TRUE(agent.Send(out));
  ASSERT_TRUE(agent.Exit(0, 0));
  ASSERT_TRUE(agent.Exit(1, 0));
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kShutdown);
  EXPECT_EQ(m.shutdown().exit_code(), 0);
  EXPECT_TRUE(agent.Finish().ok());
  job_->AgentProcessExited(0, "exited with code 0");  // as its ssh would
  EXPECT_EQ(Wait(), 0);
  EXPECT_EQ(Printed(), "[1]<stdout>:hello\n[1]<stdout>:world\n");
}

TEST_F(JobTest, FirstFailureTerminatesTheRestAndSetsTheCode) {
  Start(OneHost(2));
  FakeAgent agent(port());
  ASSERT_TRUE(agent.Hello(0));
  LauncherMessage m;
  ASSERT_TRUE(agent.Next(&m));  // welcome
  ASSERT_TRUE(agent.Next(&m));  // launch
  ASSERT_TRUE(agent.Exit(1, 3));
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kTerminate);
  EXPECT_THAT(m.terminate().reason(),
              HasSubstr("rank 1 (host hostA) exited with code 3"));
  ASSERT_TRUE(agent.Exit(0, 0, SIGTERM));  // a consequence, not a cause
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kShutdown);
  EXPECT_EQ(m.shutdown().exit_code(), 3);
  agent.Finish();
  job_->AgentProcessExited(0, "exited with code 3");
  EXPECT_EQ(Wait(), 3);
  EXPECT_THAT(Printed(), HasSubstr("hvdrun: rank 1 (host hostA) exited with "
                                   "code 3\n"));
  EXPECT_THAT(Printed(), ::testing::Not(HasSubstr("rank 0")));
}

TEST_F(JobTest, APlainExitWaitsBrieflyForItsCause) {
  Start(OneHost(3));
  FakeAgent agent(port());
  ASSERT_TRUE(agent.Hello(0));
  LauncherMessage m;
  ASSERT_TRUE(agent.Next(&m));  // welcome
  ASSERT_TRUE(agent.Next(&m));  // launch
  ASSERT_TRUE(agent.Exit(1, 1));           // a survivor's exit, first
  ASSERT_TRUE(agent.Exit(2, 0, SIGKILL));  // the cause, a moment later
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kTerminate);
  EXPECT_THAT(m.terminate().reason(),
              HasSubstr("rank 2 (host hostA) killed by signal 9"));
  ASSERT_TRUE(agent.Exit(0, 0, SIGTERM));
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kShutdown);
  EXPECT_EQ(m.shutdown().exit_code(), 137);
  agent.Finish();
  job_->AgentProcessExited(0, "exited with code 137");
  EXPECT_EQ(Wait(), 137);
  EXPECT_THAT(Printed(), ::testing::Not(HasSubstr("rank 1 (host hostA)")));
}

TEST_F(JobTest, SilentAgentIsLost) {
  JobConfig c = OneHost(1);
  c.heartbeat_interval = absl::Milliseconds(50);
  c.heartbeat_timeout = absl::Milliseconds(300);
  Start(c);
  FakeAgent agent(port());
  ASSERT_TRUE(agent.Hello(0));  // and then nothing, not even heartbeats
  EXPECT_EQ(Wait(), 1);
  EXPECT_THAT(Printed(),
              HasSubstr("hvdrun: host hostA: no heartbeat from hvd-agent for"));
}

TEST_F(JobTest, FirstMessageMustBeHello) {
  Start(OneHost(1));
  FakeAgent agent(port());
  ASSERT_TRUE(agent.Exit(0, 0));
  grpc::Status s = agent.Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("must be Hello"));
}

TEST_F(JobTest, SecondAgentForTheSameHostIsRefused) {
  Start(OneHost(1));
  FakeAgent first(port());
  ASSERT_TRUE(first.Hello(0));
  LauncherMessage m;
  ASSERT_TRUE(first.Next(&m));
  FakeAgent second(port());
  second.Hello(0);
  grpc::Status s = second.Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(s.error_message(), HasSubstr("host hostA already joined"));
}

TEST_F(JobTest, WrongTokenNeverReachesTheJob) {
  Start(OneHost(1));
  FakeAgent agent(port(), "wrong-token");
  agent.Hello(0);
  grpc::Status s = agent.Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(JobTest, StartTimeoutNamesTheMissingHosts) {
  JobConfig c = OneHost(1);
  c.start_timeout = absl::Milliseconds(200);
  Start(c);
  EXPECT_EQ(Wait(), 1);
  EXPECT_THAT(Printed(), HasSubstr("hvdrun: host hostA: hvd-agent did not "
                                   "connect within 0.2 s"));
}

TEST_F(JobTest, DeadlinesFollowTheInjectedClock) {
  host::FakeOs clock;
  JobConfig c = OneHost(1);
  c.start_timeout = absl::Seconds(30);
  Start(c, &clock);
  clock.Advance(absl::Seconds(31));  // no real waiting for 30 s
  EXPECT_EQ(Wait(), 1);
  EXPECT_THAT(Printed(), HasSubstr("did not connect within 30 s"));
}

// Two hosts: each reaches the other only on its second address.
TEST_F(JobTest, ProbingPicksAddressesEveryPeerReached) {
  JobConfig c;
  c.np = 2;
  c.command = {"x"};
  for (int h = 0; h < 2; ++h) {
    HostAssignment a;
    a.name = absl::StrCat("host", h);
    WorkerSlot w;
    w.rank = h;
    w.cross_rank = h;
    w.cross_size = 2;
    a.workers = {w};
    c.hosts.push_back(a);
  }
  Start(c);
  std::vector<std::unique_ptr<FakeAgent>> agents;
  for (int h = 0; h < 2; ++h) {
    agents.push_back(std::make_unique<FakeAgent>(port()));
    ASSERT_TRUE(agents[h]->Hello(
        h, {{"dead0", absl::StrCat("10.9.", h, ".1")},
            {"eth0", absl::StrCat("10.0.0.", h + 1)}}));
  }
  for (int h = 0; h < 2; ++h) {
    LauncherMessage m;
    ASSERT_TRUE(agents[h]->Next(&m));  // welcome
    ASSERT_TRUE(agents[h]->Next(&m));
    ASSERT_EQ(m.kind_case(), LauncherMessage::kProbe);
    ASSERT_EQ(m.probe().targets_size(), 2);
    EXPECT_EQ(m.probe().targets(0).host_index(), 1 - h);
    for (const ProbeTarget& t : m.probe().targets()) {
      AgentMessage r;
      auto* e = r.mutable_probe_result()->add_entries();
      e->set_host_index(t.host_index());
      e->set_address(t.address());
      e->set_reachable(t.address().rfind("10.0.0.", 0) == 0);
      ASSERT_TRUE(agents[h]->Send(r));
    }
  }
  for (int h = 0; h < 2; ++h) {
    LauncherMessage m;
    ASSERT_TRUE(agents[h]->Next(&m));
    ASSERT_EQ(m.kind_case(), LauncherMessage::kLaunch);
    EXPECT_EQ(m.launch().data_plane_address(), absl::StrCat("10.0.0.", h + 1));
    ASSERT_TRUE(agents[h]->Exit(h, 0));
  }
  for (int h = 0; h < 2; ++h) {
    LauncherMessage m;
    ASSERT_TRUE(agents[h]->Next(&m));
    EXPECT_EQ(m.kind_case(), LauncherMessage::kShutdown);
    agents[h]->Finish();
    job_->AgentProcessExited(h, "exited with code 0");
  }
  EXPECT_EQ(Wait(), 0);
}

// Hosts 0, 1, 2, each with one worker, each host's agent started by the
// one before it (a launch tree of fanout 1), none probing.
JobConfig Chain(int hosts) {
  JobConfig c;
  c.np = hosts;
  c.command = {"x"};
  c.network_interfaces = {"eth0"};
  c.kill_grace = absl::Milliseconds(200);
  for (int h = 0; h < hosts; ++h) {
    HostAssignment a;
    a.name = absl::StrCat("host", h);
    WorkerSlot w;
    w.rank = h;
    w.cross_rank = h;
    w.cross_size = hosts;
    a.workers = {w};
    c.hosts.push_back(a);
    c.agent_parents.push_back(h - 1);
  }
  return c;
}

TEST_F(JobTest, AnAgentBelowThatCouldNotStartIsNamedWithItsStarter) {
  Start(Chain(2));
  FakeAgent top(port());
  ASSERT_TRUE(top.Hello(0, {{"eth0", "10.0.0.1"}}));
  LauncherMessage m;
  ASSERT_TRUE(top.Next(&m));  // welcome
  AgentMessage ended;
  ended.mutable_agent_ended()->set_host_index(1);
  ended.mutable_agent_ended()->set_why(
      "ssh exited with code 255: ssh: connect to host host1 port 22: No "
      "route to host");
  ASSERT_TRUE(top.Send(ended));
  ASSERT_TRUE(top.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kShutdown);
  top.Finish();
  job_->AgentProcessExited(0, "exited with code 1");
  // Host 1's agent was never hvdrun's process: nothing more is waited for.
  EXPECT_EQ(Wait(), 1);
  EXPECT_THAT(Printed(),
              HasSubstr("hvdrun: host host1: could not start hvd-agent: ssh "
                        "exited with code 255: ssh: connect to host host1 "
                        "port 22: No route to host (started by the agent of "
                        "host0)"));
}

TEST_F(JobTest, AnAgentLostBelowAnotherIsHeldForThatOnesLoss) {
  Start(Chain(3));
  std::vector<std::unique_ptr<FakeAgent>> agents;
  for (int h = 0; h < 3; ++h) {
    agents.push_back(std::make_unique<FakeAgent>(port()));
    ASSERT_TRUE(agents[h]->Hello(h, {{"eth0", absl::StrCat("10.0.0.", h)}}));
    LauncherMessage m;
    ASSERT_TRUE(agents[h]->Next(&m));  // welcome
  }
  // Host 1's agent dies and takes host 2's with it; host 2's stream is
  // seen closed first.
  agents[2].reset();
  absl::SleepFor(absl::Milliseconds(300));
  agents[1].reset();
  LauncherMessage m;
  while (agents[0]->Next(&m) && m.kind_case() != LauncherMessage::kShutdown) {
  }
  agents[0]->Finish();
  job_->AgentProcessExited(0, "exited with code 1");
  EXPECT_EQ(Wait(), 1);
  EXPECT_THAT(Printed(),
              HasSubstr("hvdrun: host host1: lost the connection to "
                        "hvd-agent"));
  EXPECT_THAT(Printed(), Not(HasSubstr("hvdrun: host host2:")));
}

TEST_F(JobTest, AnAgentCannotReportTheEndOfOneItDidNotStart) {
  Start(Chain(3));
  FakeAgent top(port());
  ASSERT_TRUE(top.Hello(0, {{"eth0", "10.0.0.1"}}));
  LauncherMessage m;
  ASSERT_TRUE(top.Next(&m));  // welcome
  AgentMessage ended;
  ended.mutable_agent_ended()->set_host_index(2);  // host 1 started it
  ended.mutable_agent_ended()->set_why("made up");
  ASSERT_TRUE(top.Send(ended));
  ended.mutable_agent_ended()->set_host_index(7);  // no such host
  ASSERT_TRUE(top.Send(ended));
  job_->Interrupt(SIGTERM);
  while (top.Next(&m) && m.kind_case() != LauncherMessage::kShutdown) {
  }
  top.Finish();
  job_->AgentProcessExited(0, "exited with code 143");
  Wait();
  EXPECT_THAT(Printed(), HasSubstr("hvdrun: warning: the agent of host0 "
                                   "reported the end of an agent it did not "
                                   "start (host #2); ignored"));
  EXPECT_THAT(Printed(), HasSubstr("(host #7); ignored"));
  EXPECT_THAT(Printed(), Not(HasSubstr("made up")));
}

TEST_F(JobTest, InterruptEndsTheJobWith128PlusSignal) {
  Start(OneHost(1));
  FakeAgent agent(port());
  ASSERT_TRUE(agent.Hello(0));
  LauncherMessage m;
  ASSERT_TRUE(agent.Next(&m));  // welcome
  ASSERT_TRUE(agent.Next(&m));  // launch
  job_->Interrupt(SIGINT);
  ASSERT_TRUE(agent.Next(&m));
  ASSERT_EQ(m.kind_case(), LauncherMessage::kTerminate);
  ASSERT_TRUE(agent.Exit(0, 0, SIGTERM));
  ASSERT_TRUE(agent.Next(&m));
  EXPECT_EQ(m.shutdown().exit_code(), 130);
  agent.Finish();
  job_->AgentProcessExited(0, "exited with code 130");
  EXPECT_EQ(Wait(), 130);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
