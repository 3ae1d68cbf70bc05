#include "core/testing/job_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/rendezvous/rendezvous_server.h"

extern char** environ;

namespace hvd::testing {
namespace {

constexpr char kToken[] = "runtime-test-token-0123456789abcdef";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> WorkerEnv(const JobSpec& spec, int rank, int port) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (spec.bare) {
    std::erase_if(env, [](const auto& kv) {
      return kv.first.rfind("HVD_", 0) == 0 ||
             kv.first.rfind("HOROVOD_", 0) == 0;
    });
  } else {
    env["HVD_RANK"] = absl::StrCat(rank);
    env["HVD_SIZE"] = absl::StrCat(spec.size);
    env["HVD_LOCAL_RANK"] = absl::StrCat(rank);
    env["HVD_LOCAL_SIZE"] = absl::StrCat(spec.size);
    env["HVD_CROSS_RANK"] = "0";
    env["HVD_CROSS_SIZE"] = "1";
    env["HVD_HOSTNAME"] = "localhost";
    env["HVD_RENDEZVOUS_ADDR"] = absl::StrCat("127.0.0.1:", port);
    env["HVD_JOB_TOKEN"] = kToken;
    env["HVD_IFACE"] = "127.0.0.1";
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  if (auto it = spec.rank_env.find(rank); it != spec.rank_env.end()) {
    for (const auto& [k, v] : it->second) env[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(absl::StrCat(k, "=", v));
  return out;
}

pid_t Spawn(const std::vector<std::string>& argv,
            const std::vector<std::string>& env, const std::string& out,
            const std::string& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(),
                  envp.data()) != 0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

}  // namespace

std::vector<WorkerResult> RunJob(const JobSpec& spec) {
  RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  options.token = kToken;
  options.size = spec.server_size < 0 ? spec.size : spec.server_size;
  options.extra_services = spec.services;
  RendezvousServer server(options);
  std::vector<WorkerResult> results(spec.size);
  if (absl::Status s = server.Start(); !s.ok()) {
    results[0].err = std::string(s.message());
    return results;
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  std::vector<std::string> argv = {spec.driver};
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  std::vector<pid_t> pids(spec.size);
  for (int r = 0; r < spec.size; ++r) {
    const std::string base = absl::StrCat(dir, "/rank", r, ".", getpid());
    pids[r] = Spawn(argv, WorkerEnv(spec, r, server.port()), base + ".out",
                    base + ".err");
  }
  const absl::Time deadline = absl::Now() + spec.timeout;
  int running = spec.size;
  std::vector<bool> done(spec.size, false);
  while (running > 0) {
    for (int r = 0; r < spec.size; ++r) {
      if (done[r] || pids[r] <= 0) {
        if (!done[r]) --running;
        done[r] = true;
        continue;
      }
      int status = 0;
      const bool late = absl::Now() > deadline;
      if (late) kill(pids[r], SIGKILL);
      if (waitpid(pids[r], &status, late ? 0 : WNOHANG) == pids[r]) {
        done[r] = true;
        --running;
        if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
      }
    }
    usleep(10000);
  }
  for (int r = 0; r < spec.size; ++r) {
    const std::string base = absl::StrCat(dir, "/rank", r, ".", getpid());
    results[r].out = ReadFile(base + ".out");
    results[r].err = ReadFile(base + ".err");
  }
  server.Shutdown();
  return results;
}

std::string Describe(const std::vector<WorkerResult>& results) {
  std::string text;
  for (size_t r = 0; r < results.size(); ++r) {
    absl::StrAppend(&text, "--- rank ", r, ": exit ", results[r].exit_code,
                    " signal ", results[r].signal, "\nstdout:\n",
                    results[r].out, "stderr:\n", results[r].err, "\n");
  }
  return text;
}

}  // namespace hvd::testing
