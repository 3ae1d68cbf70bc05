// One training process of this host: started with its HVD_* environment in a
// process group of its own, its stdout and stderr cut into lines and handed
// on, its exit reported once its output is out.
#ifndef HVD_AGENT_WORKER_H_
#define HVD_AGENT_WORKER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "host/output_lines.h"
#include "host/process.h"

namespace hvd {
namespace agent {

struct WorkerCallbacks {
  // Whole lines (see host::LineSplitter); called from the worker's pump
  // threads, one call at a time per stream.
  std::function<void(int rank, host::OutputStream, std::string lines)> output;
  // Called once, after the process has ended and its output has been handed
  // on (or 1 s after its end, if something it started keeps the pipes open).
  std::function<void(int rank, host::ExitStatus)> exited;
};

// Thread-safe.
class Worker {
 public:
  // Spawns `options` (stdout and stderr are made pipes) through `os`. Must be
  // called from a thread that outlives the worker when options ask for a
  // parent-death signal. The error says why it could not start.
  static absl::StatusOr<std::unique_ptr<Worker>> Start(
      host::Os* os, int rank, host::SpawnOptions options,
      WorkerCallbacks callbacks);
  // Stops the pump threads (without waiting for output that has not come)
  // and joins every thread; the process should have ended by then.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int rank() const { return rank_; }
  pid_t pid() const { return pid_; }  // also its process group
  bool exited() const { return exited_; }
  // Sends `sig` to the worker's process group.
  void Signal(int sig);

 private:
  Worker(int rank, std::unique_ptr<host::Process> process,
         WorkerCallbacks callbacks);
  void Pump(int fd, host::OutputStream stream);
  void Wait();

  const int rank_;
  const pid_t pid_;
  std::unique_ptr<host::Process> process_;
  WorkerCallbacks callbacks_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> exited_{false};
  absl::Mutex mu_;
  int pumps_running_ ABSL_GUARDED_BY(mu_) = 2;
  std::thread out_, err_, waiter_;
};

}  // namespace agent
}  // namespace hvd

#endif  // HVD_AGENT_WORKER_H_
