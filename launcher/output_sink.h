// Worker output in hvdrun: each line printed with horovodrun's prefix
// "[rank]<stdout>:" (after the local time with
// --prefix-output-with-timestamp) and, with --output-filename, also kept per
// rank.
#ifndef HVD_LAUNCHER_OUTPUT_SINK_H_
#define HVD_LAUNCHER_OUTPUT_SINK_H_

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "host/output_lines.h"
#include "host/process.h"

namespace hvd {
namespace launcher {

// Where hvdrun puts worker output. Thread-safe: lines from different ranks
// never interleave inside a line (each call is one write(2) per stream,
// under a lock).
class OutputSink {
 public:
  // `stdout_fd`/`stderr_fd`: where prefixed lines go (1 and 2 in hvdrun).
  // `dir`: if not empty, each rank's raw output also goes to
  // dir/rank.<r>/stdout and .../stderr (created on first use).
  // `clock`: if not null, each line printed starts with its local time, as
  // horovodrun writes it ("Wed Nov 25 06:10:00 2026[0]<stdout>:").
  OutputSink(int stdout_fd, int stderr_fd, std::string dir,
             host::Os* clock = nullptr);
  ~OutputSink();
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // `lines`: whole lines, as host::LineSplitter produces them. An error only
  // for the per-rank file (named); the terminal copy is best effort.
  absl::Status Write(int rank, host::OutputStream stream,
                     absl::string_view lines);
  // A line of hvdrun's own on stderr ("hvdrun: ..."), never inside a worker's.
  void Message(absl::string_view line);

 private:
  absl::Status WriteFile(int rank, host::OutputStream stream,
                         absl::string_view lines)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fds_[2];
  const std::string dir_;
  host::Os* const clock_;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, FILE*> files_ ABSL_GUARDED_BY(mu_);
};

// "[3]<stdout>:" etc. before each line of `lines`, after `stamp`.
std::string PrefixLines(int rank, host::OutputStream stream,
                        absl::string_view lines,
                        absl::string_view stamp = "");

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_OUTPUT_SINK_H_
