// Test helpers: run a command with a deadline and collect its output, and
// find the live processes of a test run by a marker in their environment.
#ifndef HVD_LAUNCHER_TEST_COMMAND_H_
#define HVD_LAUNCHER_TEST_COMMAND_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "host/process.h"

namespace hvd {
namespace launcher {

struct CommandResult {
  host::ExitStatus status;
  std::string out, err;
  bool timed_out = false;
};

// A command running in the background, its stdout and stderr collected.
class BackgroundCommand {
 public:
  // Starts argv with exactly `env`; CHECK-fails the test if it cannot start.
  BackgroundCommand(std::vector<std::string> argv, std::vector<std::string> env,
                    const std::string& cwd = "");
  ~BackgroundCommand();
  pid_t pid() const { return process_->pid(); }
  // Waits up to `timeout`; past it, SIGKILLs the command's group and sets
  // timed_out.
  CommandResult Wait(absl::Duration timeout);

 private:
  std::unique_ptr<host::Process> process_;
  std::string out_, err_;
  std::thread out_thread_, err_thread_;
  bool waited_ = false;
};

CommandResult RunCommand(std::vector<std::string> argv,
                         std::vector<std::string> env,
                         absl::Duration timeout, const std::string& cwd = "");

// Live (not zombie) processes whose environment holds the entry `entry`
// ("NAME=VALUE").
std::vector<pid_t> LiveProcessesWithEnv(absl::string_view entry);
// Polls until none is left or `timeout` passes; returns those left.
std::vector<pid_t> WaitForNoProcessesWithEnv(absl::string_view entry,
                                             absl::Duration timeout);

// $TEST_SRCDIR/hvd/<path> (a runfile of the test).
std::string Runfile(absl::string_view path);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_TEST_COMMAND_H_
