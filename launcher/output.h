// Worker output: the agent cuts it into whole lines (LineSplitter); hvdrun
// prints each line with horovodrun's prefix "[rank]<stdout>:" and, with
// --output-filename, also keeps it per rank (OutputSink).
#ifndef HVD_LAUNCHER_OUTPUT_H_
#define HVD_LAUNCHER_OUTPUT_H_

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace hvd {
namespace launcher {

// Accumulates a byte stream and hands out whole lines. Not thread-safe.
class LineSplitter {
 public:
  // A line longer than this is cut (a newline is inserted), so a program that
  // never ends its line cannot grow the buffer without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  // Adds `data`; returns the complete lines now available (each ending in
  // '\n'), possibly empty.
  std::string Add(absl::string_view data);
  // The unterminated rest with '\n' added; empty if there is none.
  std::string Flush();

 private:
  std::string partial_;
};

enum class OutputStream { kStdout = 0, kStderr = 1 };

// Where hvdrun puts worker output. Thread-safe: lines from different ranks
// never interleave inside a line (each call is one write(2) per stream,
// under a lock).
class OutputSink {
 public:
  // `stdout_fd`/`stderr_fd`: where prefixed lines go (1 and 2 in hvdrun).
  // `dir`: if not empty, each rank's raw output also goes to
  // dir/rank.<r>/stdout and .../stderr (created on first use).
  OutputSink(int stdout_fd, int stderr_fd, std::string dir);
  ~OutputSink();
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // `lines`: whole lines, as LineSplitter produces them. An error only for
  // the per-rank file (named); the terminal copy is best effort.
  absl::Status Write(int rank, OutputStream stream, absl::string_view lines);
  // A line of hvdrun's own on stderr ("hvdrun: ..."), never inside a worker's.
  void Message(absl::string_view line);

 private:
  absl::Status WriteFile(int rank, OutputStream stream,
                         absl::string_view lines)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fds_[2];
  const std::string dir_;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, FILE*> files_ ABSL_GUARDED_BY(mu_);
};

// "[3]<stdout>:" etc. before each line of `lines`.
std::string PrefixLines(int rank, OutputStream stream, absl::string_view lines);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_OUTPUT_H_
