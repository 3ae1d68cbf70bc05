#include "core/bootstrap/open_files.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hvd::bootstrap {

OpenFiles OpenFilesFor(int size) {
  return {int64_t{size} + 32, int64_t{size} + 256};
}

absl::Status EnsureOpenFiles(const OpenFiles& files) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(
        absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  const rlim_t required = static_cast<rlim_t>(files.required);
  rlim_t want = static_cast<rlim_t>(files.wanted);
  if (limit.rlim_max != RLIM_INFINITY) {
    if (limit.rlim_max < required) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this rank needs ", files.required,
          " open files (a connection to every peer), but the hard limit on "
          "open files is ", limit.rlim_max,
          ": raise it for the job's processes (ulimit -Hn, LimitNOFILE= in "
          "a systemd unit, nofile in /etc/security/limits.conf, docker "
          "--ulimit nofile=)"));
    }
    want = std::min(want, limit.rlim_max);
  }
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= want) {
    return absl::OkStatus();
  }
  limit.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat(
        "setrlimit(RLIMIT_NOFILE, ", want, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace hvd::bootstrap
