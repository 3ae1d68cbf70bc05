// Fuzzes hvdrun's side of the agent protocol: a real Job (launcher mode, two
// hosts of one worker, or orchestrator mode for two workers) behind a real
// rendezvous server on loopback, and two agents, played by this harness
// with the job token, that send it messages built from the input. Whatever
// they send, the job must neither crash nor hang: once the harness drops
// both streams, says the agents' processes ended (launcher mode) and
// interrupts the job, Run returns.
//
// Input: [mode byte: bit 0 orchestrator mode] then repeated
// [agent byte: bit 0 which agent][length byte][bytes], the bytes parsed as
// an AgentMessage (unparsable ones are sent empty).
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "absl/time/clock.h"
#include "core/rendezvous/rendezvous_server.h"
#include "grpcpp/grpcpp.h"
#include "launcher/job.h"
#include "proto/job_token.h"
#include "proto/launcher.grpc.pb.h"

namespace {

namespace launcher = hvd::launcher;
constexpr char kToken[] = "agent-rpc-fuzzer-token-0123456789";

launcher::JobConfig Config(bool orchestrated) {
  launcher::JobConfig c;
  c.orchestrated = orchestrated;
  c.np = 2;
  if (!orchestrated) {
    for (int h = 0; h < 2; ++h) {
      launcher::HostAssignment host;
      host.name = absl::StrCat("host", h);
      launcher::WorkerSlot w;
      w.rank = h;
      host.workers.push_back(w);
      c.hosts.push_back(host);
    }
  }
  c.command = {"train"};
  c.start_timeout = absl::Seconds(1);
  c.kill_grace = absl::Milliseconds(50);
  c.heartbeat_interval = absl::Milliseconds(20);
  c.heartbeat_timeout = absl::Milliseconds(200);
  c.probe_timeout = absl::Milliseconds(200);
  return c;
}

struct Agent {
  explicit Agent(const std::shared_ptr<grpc::Channel>& channel)
      : stub(launcher::AgentService::NewStub(channel)) {
    context.AddMetadata(hvd::rendezvous::kJobTokenMetadataKey, kToken);
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    stream = stub->Attach(&context);
    // What the job sends is read and dropped, so its writer never stalls.
    reader = std::thread([this] {
      launcher::LauncherMessage m;
      while (stream->Read(&m)) {
      }
    });
  }
  ~Agent() {
    context.TryCancel();
    reader.join();
    stream->Finish().IgnoreError();
  }
  std::unique_ptr<launcher::AgentService::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<launcher::AgentMessage,
                                           launcher::LauncherMessage>>
      stream;
  std::thread reader;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Strings that are not UTF-8 are refused by protobuf with a log line each.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  static const int null_fd = open("/dev/null", O_WRONLY);
  launcher::OutputSink sink(null_fd, null_fd, "");
  const bool orchestrated = size > 0 && (data[0] & 1);
  launcher::Job job(Config(orchestrated), &sink);
  hvd::RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  options.token = kToken;
  options.extra_services = {&job};
  hvd::RendezvousServer server(options);
  if (!server.Start().ok()) __builtin_trap();
  std::thread runner([&] { job.Run(); });
  {
    auto channel =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                            grpc::InsecureChannelCredentials());
    Agent agents[2] = {Agent(channel), Agent(channel)};
    for (size_t i = 1; i + 2 <= size;) {
      const int which = data[i] & 1;
      const size_t n = std::min<size_t>(data[i + 1], size - i - 2);
      launcher::AgentMessage m;
      if (!m.ParseFromArray(data + i + 2, static_cast<int>(n))) m.Clear();
      agents[which].stream->Write(m);
      i += 2 + n;
    }
  }  // both streams dropped
  // As hvdrun hears when the agents' processes end (else the job would wait
  // its grace period for workers that can no longer report).
  if (!orchestrated) {
    for (int h = 0; h < 2; ++h) job.AgentProcessExited(h, "the harness ended");
  }
  job.Interrupt(SIGTERM);
  runner.join();
  job.CloseStreams();
  server.Shutdown();
  return 0;
}
