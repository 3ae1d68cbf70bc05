#include "launcher/output_sink.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "host/process.h"

namespace hvd {
namespace launcher {

std::string PrefixLines(int rank, host::OutputStream stream,
                        absl::string_view lines, absl::string_view stamp) {
  const std::string prefix = absl::StrCat(
      stamp, "[", rank, "]<",
      stream == host::OutputStream::kStdout ? "stdout" : "stderr", ">:");
  std::string out;
  out.reserve(lines.size() + prefix.size() * 4);
  while (!lines.empty()) {
    size_t nl = lines.find('\n');
    size_t len = nl == absl::string_view::npos ? lines.size() : nl + 1;
    out += prefix;
    out.append(lines.data(), len);
    if (nl == absl::string_view::npos) out += '\n';
    lines.remove_prefix(len);
  }
  return out;
}

OutputSink::OutputSink(int stdout_fd, int stderr_fd, std::string dir,
                       host::Os* clock)
    : fds_{stdout_fd, stderr_fd}, dir_(std::move(dir)), clock_(clock) {}

OutputSink::~OutputSink() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, f] : files_) {
    if (f != nullptr) fclose(f);
  }
}

absl::Status OutputSink::Write(int rank, host::OutputStream stream,
                               absl::string_view lines) {
  if (lines.empty()) return absl::OkStatus();
  // Python's time.asctime(), as horovodrun stamps lines.
  const std::string stamp =
      clock_ == nullptr ? ""
                        : absl::FormatTime("%a %b %e %H:%M:%S %Y",
                                           clock_->Now(),
                                           absl::LocalTimeZone());
  std::string text = PrefixLines(rank, stream, lines, stamp);
  absl::MutexLock lock(&mu_);
  // Best effort: a closed terminal must not end the job.
  host::WriteAll(fds_[static_cast<int>(stream)], text).IgnoreError();
  if (dir_.empty()) return absl::OkStatus();
  return WriteFile(rank, stream, lines);
}

absl::Status OutputSink::WriteFile(int rank, host::OutputStream stream,
                                   absl::string_view lines) {
  auto key = std::make_pair(rank, static_cast<int>(stream));
  auto it = files_.find(key);
  if (it == files_.end()) {
    std::string rank_dir = absl::StrCat(dir_, "/rank.", rank);
    mkdir(dir_.c_str(), 0755);
    mkdir(rank_dir.c_str(), 0755);
    std::string path = absl::StrCat(
        rank_dir,
        stream == host::OutputStream::kStdout ? "/stdout" : "/stderr");
    FILE* f = fopen(path.c_str(), "w");
    it = files_.emplace(key, f).first;
    if (f == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write ", path, ": ", strerror(errno)));
    }
  }
  if (it->second == nullptr) return absl::OkStatus();  // reported once
  fwrite(lines.data(), 1, lines.size(), it->second);
  fflush(it->second);
  return absl::OkStatus();
}

void OutputSink::Message(absl::string_view line) {
  std::string text(line);
  if (text.empty() || text.back() != '\n') text += '\n';
  absl::MutexLock lock(&mu_);
  host::WriteAll(fds_[1], text).IgnoreError();
}

}  // namespace launcher
}  // namespace hvd
