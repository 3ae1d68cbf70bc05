// Loading libhvd leaves the process's fatal and termination signals at
// their defaults: libfabric's libinfinipath does not keep them.
#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <initializer_list>

#include "core/c_api.h"
#include "gtest/gtest.h"

namespace {

TEST(SignalHygiene, NoSignalHandlerOfLibinfinipathSurvivesTheLoad) {
  ASSERT_NE(hvd_version(), nullptr);  // links the library in
  for (int signo : {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM}) {
    struct sigaction current;
    ASSERT_EQ(sigaction(signo, nullptr, &current), 0);
    void* handler = reinterpret_cast<void*>(current.sa_handler);
    if (handler == reinterpret_cast<void*>(SIG_DFL)) continue;
    Dl_info info;
    ASSERT_NE(dladdr(handler, &info), 0);
    EXPECT_EQ(std::strstr(info.dli_fname, "libinfinipath"), nullptr)
        << "signal " << signo << " is handled by " << info.dli_fname;
  }
}

}  // namespace
