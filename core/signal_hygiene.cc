// libhvd.so links libfabric (the RDMA transport), and Debian's libfabric
// links libinfinipath, whose load-time constructor installs its own
// backtrace-and-exit handler for SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV
// and SIGTERM (unless IPATH_NO_BACKTRACE is set). A program using hvd would
// then die oddly on Ctrl-C or SIGTERM (its exit() inside a signal handler
// recurses into locks held by the interrupted thread) and leave *.btr files
// behind. At load, after that constructor, the handlers that point into
// libinfinipath are put back to the default. (The Python package sets
// IPATH_NO_BACKTRACE before it loads the library, so Python's own handlers
// are never replaced.)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <initializer_list>

namespace hvd::api {
namespace {

bool FromInfinipath(void* handler) {
  Dl_info info;
  return dladdr(handler, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libinfinipath") != nullptr;
}

bool RestoreDefaultSignals() {
  for (int signo : {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM}) {
    struct sigaction current;
    if (sigaction(signo, nullptr, &current) != 0) continue;
    void* handler = (current.sa_flags & SA_SIGINFO)
                        ? reinterpret_cast<void*>(current.sa_sigaction)
                        : reinterpret_cast<void*>(current.sa_handler);
    if (handler == reinterpret_cast<void*>(SIG_DFL) ||
        handler == reinterpret_cast<void*>(SIG_IGN) || !FromInfinipath(handler)) {
      continue;
    }
    signal(signo, SIG_DFL);
  }
  return true;
}

[[maybe_unused]] const bool kSignalsRestored = RestoreDefaultSignals();

}  // namespace
}  // namespace hvd::api
