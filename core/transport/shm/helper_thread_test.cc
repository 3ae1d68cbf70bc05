// The shared-memory helper thread as the operating system sees it: named,
// and standing by under SCHED_BATCH, so that a peer's nudges do not preempt
// the rank's own thread in the middle of a copy -- and still draining for a
// peer while that thread keeps the only core busy.
#include <dirent.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "core/rendezvous/store.h"
#include "core/transport/shm/shm_context.h"
#include "gtest/gtest.h"

namespace hvd::transport {
namespace {

// The ids of this process's threads named `name`.
std::vector<pid_t> ThreadsNamed(const std::string& name) {
  std::vector<pid_t> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == name) tids.push_back(std::atoi(e->d_name));
  }
  closedir(dir);
  return tids;
}

// Ranks 0 and 1 of a job of two, both in this process.
std::vector<std::unique_ptr<Context>> ConnectTwo(Store* store) {
  std::vector<absl::StatusOr<ShmMesh>> meshes(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back(
        [&, r] { meshes[r] = CreateShmContext(r, 2, {0, 1}, store, {}); });
  }
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<Context>> contexts;
  for (auto& m : meshes) {
    EXPECT_TRUE(m.ok()) << m.status();
    if (m.ok()) contexts.push_back(std::move(m->context));
  }
  return contexts;
}

TEST(ShmHelperThread, IsNamedAndStandsByWithoutPreempting) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  auto contexts = ConnectTwo(store.get());
  ASSERT_EQ(contexts.size(), 2u);
  // Each helper names itself and takes its policy once it runs, which on a
  // loaded machine can be a while after the context is made.
  auto standing_by = [] {
    std::vector<pid_t> helpers = ThreadsNamed("hvd-shm-helper");
    for (pid_t tid : helpers) {
      if (sched_getscheduler(tid) != SCHED_BATCH) return std::vector<pid_t>();
    }
    return helpers;
  };
  std::vector<pid_t> helpers = standing_by();
  for (int i = 0; i < 500 && helpers.size() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    helpers = standing_by();
  }
  EXPECT_EQ(helpers.size(), 2u);  // one per context, each SCHED_BATCH
  contexts.clear();
  EXPECT_TRUE(ThreadsNamed("hvd-shm-helper").empty());
}

// Everything on one core: the receiver's owner spins outside the transport
// (as a framework computes) while the sender's message does not fit the
// ring. The helper, which never preempts the spinner, still gets its turns
// and drains the message.
TEST(ShmHelperThread, DrainsForAPeerWhileItsOwnerKeepsTheOnlyCoreBusy) {
  cpu_set_t before, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  {
    std::unique_ptr<Store> store = NewInMemoryStore();
    auto contexts = ConnectTwo(store.get());
    ASSERT_EQ(contexts.size(), 2u);
    const std::string msg(4 << 20, 'x');  // four rings full
    std::string got(msg.size(), '\0');
    auto recv = contexts[1]->Recv(0, got.data(), got.size());
    std::atomic<bool> sent{false};
    std::thread owner([&] {
      const absl::Time give_up = absl::Now() + absl::Seconds(20);
      while (!sent.load() && absl::Now() < give_up) {
      }
    });
    const absl::Time start = absl::Now();
    const absl::Status status =
        contexts[0]->Send(1, msg.data(), msg.size())->Wait(start +
                                                          absl::Seconds(15));
    sent.store(true);
    owner.join();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_TRUE(recv->Wait(absl::Now() + absl::Seconds(15)).ok());
    EXPECT_TRUE(got == msg);
  }
  sched_setaffinity(0, sizeof(before), &before);
}

}  // namespace
}  // namespace hvd::transport
