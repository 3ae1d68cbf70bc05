// The fixture of the multi-host tests: the hosts netns_hosts.sh made (read
// from its HVD_MH_* variables), hvdrun run inside one of them, and the check
// that nothing of a job is left on any host.
#ifndef HVD_TESTS_MULTIHOST_MULTIHOST_TEST_BASE_H_
#define HVD_TESTS_MULTIHOST_MULTIHOST_TEST_BASE_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "launcher/test_command.h"

namespace hvd {
namespace multihost {

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // HVD_MH_<what>_<host>, e.g. Var("ADDR", "h1").
  static std::string Var(const std::string& what, const std::string& host);
  static std::string Addr(const std::string& host) { return Var("ADDR", host); }

  // hvdrun inside `host`'s namespace, with the harness's ssh config and key
  // and the built agent; `args` follow.
  std::vector<std::string> Hvdrun(const std::vector<std::string>& args,
                                  const std::string& host = "h0",
                                  bool with_key = true) const;
  // The environment hvdrun gets: PATH and this test's marker (forwarded to
  // every worker, so they can be found).
  std::vector<std::string> Env() const;
  launcher::CommandResult Run(const std::vector<std::string>& args,
                              const std::string& host = "h0");
  // Absolute paths of the built binaries.
  static std::string Driver();          // with libhvd
  static std::string IdentityDriver();  // without
  static std::string Agent();

  // Processes in the hosts' namespaces other than the sshd listeners, and
  // any process carrying this test's marker; zombies excluded. With
  // `ignore_sshd`, also sshd's session processes (one cut off from its
  // client lingers until TCP gives up: sshd's business, not the job's).
  std::vector<pid_t> JobProcesses(bool ignore_sshd = false) const;
  // Waits up to `timeout` for JobProcesses() to be empty; describes the
  // survivors if not.
  ::testing::AssertionResult NothingLeftWithin(absl::Duration timeout,
                                               bool ignore_sshd = false) const;
  // The live processes with `entry` in their environment and this test's
  // marker (e.g. a worker by "HVD_RANK=1").
  std::vector<pid_t> Workers(const std::string& entry) const;
  // Waits until `n` processes carry the marker and `entry`.
  bool WaitForWorkers(const std::string& entry, size_t n,
                      absl::Duration timeout) const;
  // The hvd-agent process (not its reaper) running in `host`'s namespace.
  pid_t AgentPid(const std::string& host) const;

  std::string mark_;
  std::string tmp_;
};

}  // namespace multihost
}  // namespace hvd

#endif  // HVD_TESTS_MULTIHOST_MULTIHOST_TEST_BASE_H_
