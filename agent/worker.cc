#include "agent/worker.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

namespace hvd {
namespace agent {

absl::StatusOr<std::unique_ptr<Worker>> Worker::Start(
    host::Os* os, int rank, host::SpawnOptions options,
    WorkerCallbacks callbacks) {
  options.stdout_mode = host::Stdio::kPipe;
  options.stderr_mode = host::Stdio::kPipe;
  absl::StatusOr<std::unique_ptr<host::Process>> p = os->Spawn(options);
  if (!p.ok()) return p.status();
  return std::unique_ptr<Worker>(
      new Worker(rank, *std::move(p), std::move(callbacks)));
}

Worker::Worker(int rank, std::unique_ptr<host::Process> process,
               WorkerCallbacks callbacks)
    : rank_(rank),
      pid_(process->pid()),
      process_(std::move(process)),
      callbacks_(std::move(callbacks)) {
  int out = process_->TakeStdout();
  int err = process_->TakeStderr();
  out_ = std::thread([this, out] { Pump(out, host::OutputStream::kStdout); });
  err_ = std::thread([this, err] { Pump(err, host::OutputStream::kStderr); });
  waiter_ = std::thread([this] { Wait(); });
}

Worker::~Worker() {
  stop_ = true;
  waiter_.join();
  out_.join();
  err_.join();
}

void Worker::Signal(int sig) { process_->Signal(sig).IgnoreError(); }

void Worker::Pump(int fd, host::OutputStream stream) {
  host::LineSplitter splitter;
  char buf[64 * 1024];
  while (!stop_) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, 100);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string lines = splitter.Add(absl::string_view(buf, n));
    if (!lines.empty()) callbacks_.output(rank_, stream, std::move(lines));
  }
  std::string rest = splitter.Flush();
  if (!rest.empty()) callbacks_.output(rank_, stream, std::move(rest));
  close(fd);
  absl::MutexLock lock(&mu_);
  --pumps_running_;
}

void Worker::Wait() {
  absl::StatusOr<host::ExitStatus> status = process_->Wait();
  exited_ = true;
  {
    // Output first, then the exit: hvdrun prints "rank R exited" after the
    // rank's last line.
    absl::MutexLock lock(&mu_);
    auto pumps_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pumps_running_ == 0;
    };
    mu_.AwaitWithTimeout(absl::Condition(&pumps_done), absl::Seconds(1));
  }
  callbacks_.exited(rank_, status.ok() ? *status : host::ExitStatus{1, 0});
}

}  // namespace agent
}  // namespace hvd
