// GPU tensors through the C ABI in real processes: gpu_driver started N
// times against a rendezvous server hosted by the test, every rank on GPU 0.
// Where no GPU exists only the refusal of GPU tensors runs; the rest is
// SKIPPED with the reason.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/gpu/cuda_testing.h"
#include "gtest/gtest.h"
#include "launcher/rendezvous_server.h"

extern char** environ;

namespace hvd::gpu {
namespace {

constexpr char kToken[] = "gpu-job-test-token-0123456789";

struct Worker {
  pid_t pid = -1;
  int exit_code = -1;
  std::string out, err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `size` gpu_drivers with `scenario`; SIGKILLs what is left after
// `timeout`.
std::vector<Worker> RunJob(int size, const std::string& scenario,
                           std::map<std::string, std::string> extra = {},
                           absl::Duration timeout = absl::Seconds(180)) {
  RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  options.token = kToken;
  options.size = size;
  RendezvousServer server(options);
  std::vector<Worker> workers(size);
  if (absl::Status s = server.Start(); !s.ok()) {
    workers[0].err = std::string(s.message());
    return workers;
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  for (int r = 0; r < size; ++r) {
    std::map<std::string, std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    env["HVD_RANK"] = absl::StrCat(r);
    env["HVD_SIZE"] = absl::StrCat(size);
    env["HVD_LOCAL_RANK"] = absl::StrCat(r);
    env["HVD_LOCAL_SIZE"] = absl::StrCat(size);
    env["HVD_HOSTNAME"] = "localhost";
    env["HVD_IFACE"] = "127.0.0.1";
    env["HVD_RENDEZVOUS_ADDR"] = absl::StrCat("127.0.0.1:", server.port());
    env["HVD_JOB_TOKEN"] = kToken;
    env["HVD_LOG_LEVEL"] = "info";
    for (const auto& [k, v] : extra) env[k] = v;
    std::vector<std::string> strings;
    for (const auto& [k, v] : env) strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string path = "core/gpu/gpu_driver";
    std::vector<char*> argv = {path.data(), const_cast<char*>(scenario.c_str()),
                               nullptr};
    const std::string base = absl::StrCat(dir, "/gpu_rank", r);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (base + ".out").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (base + ".err").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (posix_spawn(&workers[r].pid, path.c_str(), &actions, nullptr,
                    argv.data(), envp.data()) != 0) {
      workers[r].pid = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (int r = 0; r < size; ++r) {
    if (workers[r].pid <= 0) continue;
    int status = 0;
    while (waitpid(workers[r].pid, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(workers[r].pid, SIGKILL);
        waitpid(workers[r].pid, &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (WIFEXITED(status)) workers[r].exit_code = WEXITSTATUS(status);
    const std::string base = absl::StrCat(dir, "/gpu_rank", r);
    workers[r].out = ReadFile(base + ".out");
    workers[r].err = ReadFile(base + ".err");
  }
  server.Shutdown();
  return workers;
}

std::string Describe(const std::vector<Worker>& workers) {
  std::string text;
  for (size_t r = 0; r < workers.size(); ++r) {
    absl::StrAppend(&text, "--- rank ", r, ": exit ", workers[r].exit_code,
                    "\nstdout:\n", workers[r].out, "stderr:\n", workers[r].err,
                    "\n");
  }
  return text;
}

void ExpectPass(const std::vector<Worker>& workers, size_t first = 0,
                size_t last = SIZE_MAX) {
  for (size_t r = first; r < workers.size() && r <= last; ++r) {
    EXPECT_EQ(workers[r].exit_code, 0) << Describe(workers);
    EXPECT_TRUE(
        absl::StrContains(workers[r].out, absl::StrCat("rank ", r, ": PASS")))
        << Describe(workers);
  }
}

TEST(GpuJob, WithoutAGpuAGpuTensorFailsAtEnqueueSayingWhy) {
  if (NoGpuReason().empty()) GTEST_SKIP() << "this machine has a GPU";
  ExpectPass(RunJob(2, "nogpu"));
}

class SharedGpuJob : public ::testing::TestWithParam<int> {};

TEST_P(SharedGpuJob, EveryOpTakesTheStagedPathAndIsCorrect) {
  HVD_REQUIRE_GPU();
  auto workers = RunJob(GetParam(), "collectives");
  ExpectPass(workers);
  for (const Worker& w : workers) {
    EXPECT_TRUE(absl::StrContains(w.err, "GPU data path staged on GPU 0"))
        << w.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedGpuJob, ::testing::Values(2, 4));

TEST(GpuJob, NcclAtSizeOneThroughTheCApi) {
  HVD_REQUIRE_GPU();
  auto workers = RunJob(1, "collectives");
  ExpectPass(workers);
  EXPECT_TRUE(absl::StrContains(workers[0].err, "GPU data path nccl on GPU 0"))
      << workers[0].err;
}

TEST(GpuJob, ASurvivorOfADeadPeerGetsAnErrorNotAHang) {
  HVD_REQUIRE_GPU();
  auto workers = RunJob(2, "die", {{"HVD_TIMEOUT_SECONDS", "20"}});
  ExpectPass(workers, 0, 0);
  EXPECT_EQ(workers[1].exit_code, 3) << Describe(workers);
}

}  // namespace
}  // namespace hvd::gpu
