// Where an elastic job's hosts come from: Horovod's host discovery script
// (--host-discovery-script, run every second; it prints one `host[:slots]`
// a line) or the fixed -H / --hostfile list given with --min-np.
#ifndef HVD_LAUNCHER_HOST_DISCOVERY_H_
#define HVD_LAUNCHER_HOST_DISCOVERY_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "host/process.h"
#include "launcher/hosts.h"

namespace hvd {
namespace launcher {

// The hosts of a discovery script's output: one `host` or `host:slots` a
// line, blank lines skipped; `default_slots` for a line without slots.
// InvalidArgument naming the script and the bad line.
absl::StatusOr<std::vector<HostSlots>> ParseDiscoveryOutput(
    absl::string_view output, int default_slots, absl::string_view script);

// Runs `script` once (no arguments, the given environment), waits at most
// `timeout`, and parses what it printed. A failure quotes the script's
// stderr: "host discovery script ./d.sh exited with code 1: <stderr>".
absl::StatusOr<std::vector<HostSlots>> RunDiscoveryScript(
    host::Os* os, const std::string& script, const std::vector<std::string>& env,
    int default_slots, absl::Duration timeout);

// What discovery knows now. Thread-safe.
class HostDiscovery {
 public:
  virtual ~HostDiscovery() = default;
  struct View {
    std::vector<HostSlots> hosts;  // the last successful answer
    absl::Time last_success;
    std::string last_error;  // of the runs since then; empty: none
  };
  virtual View Latest() = 0;
};

// The -H / --hostfile list: the same answer always.
class FixedHostDiscovery : public HostDiscovery {
 public:
  FixedHostDiscovery(std::vector<HostSlots> hosts, absl::Time now);
  View Latest() override;

 private:
  const View view_;
};

// Runs the script every `interval` on a thread of its own, from the first
// answer (given by the caller, who ran it once before starting anything).
class ScriptHostDiscovery : public HostDiscovery {
 public:
  struct Options {
    std::string script;
    std::vector<std::string> env;
    int default_slots = 1;
    absl::Duration interval = absl::Seconds(1);
    absl::Duration run_timeout = absl::Seconds(30);
  };
  ScriptHostDiscovery(Options options, host::Os* os,
                      std::vector<HostSlots> first);
  ~ScriptHostDiscovery() override;  // stops and joins the thread
  View Latest() override;

 private:
  void Loop();

  const Options options_;
  host::Os* const os_;
  absl::Mutex mu_;
  View view_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_HOST_DISCOVERY_H_
