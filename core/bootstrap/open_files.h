// The open-file limit a rank's connections need. A rank holds a socket to
// every peer, so a job of more ranks than the soft RLIMIT_NOFILE (1024 on
// many systems) would fail its connects with EMFILE. As MPI's launchers do,
// the soft limit is raised towards the hard one; past the hard one, the
// rank fails at init with one line saying what to raise.
#ifndef HVD_CORE_BOOTSTRAP_OPEN_FILES_H_
#define HVD_CORE_BOOTSTRAP_OPEN_FILES_H_

#include <cstdint>

#include "absl/status/status.h"

namespace hvd::bootstrap {

// What a rank of a `size`-rank job needs open at least (a socket per peer
// and a few of hvd's own), and what it asks for (room for the framework's
// files too).
struct OpenFiles {
  int64_t required;
  int64_t wanted;
};
OpenFiles OpenFilesFor(int size);

// Raises this process's soft RLIMIT_NOFILE to `files.wanted`, or as near as
// the hard limit allows; never lowers it. ResourceExhausted naming both
// figures when the hard limit is below `files.required`.
absl::Status EnsureOpenFiles(const OpenFiles& files);

}  // namespace hvd::bootstrap

#endif  // HVD_CORE_BOOTSTRAP_OPEN_FILES_H_
