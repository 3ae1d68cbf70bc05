#include "core/common/thread_role.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace hvd {
namespace {

std::string CommOf(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

pid_t ThisThread() { return static_cast<pid_t>(syscall(SYS_gettid)); }

TEST(ThreadRole, ANamedThreadShowsItsNameInProc) {
  std::thread([] {
    NameThisThread("hvd-test-role");
    EXPECT_EQ(CommOf(ThisThread()), "hvd-test-role");
  }).join();
}

TEST(ThreadRole, ANameOverFifteenCharactersIsCutNotRefused) {
  std::thread([] {
    NameThisThread("hvd-a-very-long-role-name");
    EXPECT_EQ(CommOf(ThisThread()), "hvd-a-very-long");
  }).join();
}

TEST(ThreadRole, AStandbyThreadRunsUnderBatchAndOthersAreUntouched) {
  std::thread([] {
    StandByWithoutPreempting();
    EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  }).join();
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

}  // namespace
}  // namespace hvd
