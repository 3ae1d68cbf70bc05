// Jobs hvdrun did not start, in real processes: their ranks come from the
// variables torchrun and srun set, and they meet at the rendezvous rank 0
// serves itself (core/bootstrap/self_rendezvous.h), keyed with a token
// derived from the user's secret.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/testing/job_runner.h"
#include "gtest/gtest.h"

namespace hvd::testing {
namespace {

// A port nobody listens on now (the kernel's pick, released).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string TempHome() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string home = absl::StrCat(tmp ? tmp : "/tmp", "/home", FreePort());
  mkdir(home.c_str(), 0700);
  return home;
}

// torchrun's variables for `size` ranks on this host.
JobSpec Torchrun(int size, int master_port, const std::string& home) {
  JobSpec spec;
  spec.size = size;
  spec.bare = true;
  spec.args = {"collectives"};
  spec.env = {{"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", absl::StrCat(master_port)},
              {"WORLD_SIZE", absl::StrCat(size)},
              {"LOCAL_WORLD_SIZE", absl::StrCat(size)},
              {"HOME", home},
              {"HVD_IFACE", "127.0.0.1"}};
  for (int r = 0; r < size; ++r) {
    spec.rank_env[r] = {{"RANK", absl::StrCat(r)},
                        {"LOCAL_RANK", absl::StrCat(r)}};
  }
  return spec;
}

void ExpectAllPass(const std::vector<WorkerResult>& results) {
  for (const WorkerResult& r : results) {
    EXPECT_EQ(r.exit_code, 0) << Describe(results);
    EXPECT_TRUE(absl::StrContains(r.out, "PASS")) << Describe(results);
  }
}

TEST(LaunchContractJob, TorchrunsVariablesMakeAJobWithoutHvdrun) {
  const std::string home = TempHome();
  const std::vector<WorkerResult> results =
      RunJob(Torchrun(3, FreePort() - 1, home));
  ExpectAllPass(results);
  EXPECT_TRUE(absl::StrContains(results[2].out, "rank 2: size 3"));
  // The user's secret was made once, for the owner alone.
  struct stat st;
  ASSERT_EQ(stat((home + "/.hvd/secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
}

TEST(LaunchContractJob, SrunsVariablesMakeAJobWithoutHvdrun) {
  // Rank 0 serves at 20000 + (job * 131 + step) % 10000: find a free one.
  int job = 1;
  while (true) {
    const int port = 20000 + (job * 131) % 10000;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free =
        bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) break;
    ++job;
  }
  JobSpec spec;
  spec.size = 4;
  spec.bare = true;
  spec.args = {"collectives"};
  spec.env = {{"SLURM_JOB_ID", absl::StrCat(job)}, {"SLURM_STEP_ID", "0"},
              {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_NUM_NODES", "2"},
              // An address, not a name: gRPC's resolver (c-ares) leaks 10
              // bytes per name it resolves, which LeakSanitizer reports.
              {"SLURM_STEP_NODELIST", "127.0.0.1"},
              {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
              {"HOME", TempHome()}, {"HVD_IFACE", "127.0.0.1"}};
  for (int r = 0; r < spec.size; ++r) {
    spec.rank_env[r] = {{"SLURM_PROCID", absl::StrCat(r)},
                        {"SLURM_LOCALID", absl::StrCat(r % 2)},
                        {"SLURM_NODEID", absl::StrCat(r / 2)}};
  }
  const std::vector<WorkerResult> results = RunJob(spec);
  ExpectAllPass(results);
  EXPECT_TRUE(absl::StrContains(results[3].out,
                                "rank 3: size 4 local_rank 1 cross_rank 1"))
      << Describe(results);
}

TEST(LaunchContractJob, ARankThatNeverArrivesIsNamedByRankZero) {
  const std::string home = TempHome();
  JobSpec spec = Torchrun(3, FreePort() - 1, home);
  // Rank 2 looks for rank 0 elsewhere, and never reaches it.
  spec.rank_env[2]["MASTER_PORT"] = absl::StrCat(FreePort() - 1);
  spec.env["HVD_START_TIMEOUT"] = "3";
  const std::vector<WorkerResult> results = RunJob(spec);
  EXPECT_NE(results[0].exit_code, 0);
  EXPECT_TRUE(absl::StrContains(
      results[0].out, "ranks that never reached the rendezvous: 2 (arrived: "))
      << Describe(results);
}

TEST(LaunchContractJob, ASecretOthersCanReadIsRefused) {
  const std::string home = TempHome();
  mkdir((home + "/.hvd").c_str(), 0700);
  std::ofstream(home + "/.hvd/secret") << "not so secret";
  chmod((home + "/.hvd/secret").c_str(), 0644);
  const std::vector<WorkerResult> results =
      RunJob(Torchrun(2, FreePort() - 1, home));
  for (const WorkerResult& r : results) {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(absl::StrContains(r.out, "can be read by others than its "
                                         "owner: chmod 600 it"))
        << Describe(results);
  }
}

}  // namespace
}  // namespace hvd::testing
