// When a context's memory is reserved in /dev/shm: a segment's headers at
// start-up, a ring's pages as its writer's sends first reach them; and what
// a send that finds /dev/shm full does (an error on both ranks, never a
// SIGBUS).
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/rendezvous/store.h"
#include "core/transport/shm/layout.h"
#include "core/transport/shm/shm_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport {
namespace {

using ::testing::MatchesRegex;

constexpr size_t kRing = size_t{1} << 20;  // the default ring size

absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

// Two ranks of one host, one thread each while connecting.
std::vector<std::unique_ptr<Context>> ConnectTwo(Store* store) {
  std::vector<absl::StatusOr<ShmMesh>> meshes(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      meshes[rank] = CreateShmContext(rank, 2, {0, 1}, store, {});
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<Context>> contexts;
  for (auto& m : meshes) {
    contexts.push_back(m.ok() ? std::move(m->context) : nullptr);
  }
  return contexts;
}

// Bytes allocated in /dev/shm to each segment of this process, by the
// owner's rank. The names are unlinked once the ranks have connected, so
// the segments are found through the descriptors this process holds.
std::map<int, int64_t> AllocatedByRank() {
  std::map<int, int64_t> allocated;
  const std::string prefix = absl::StrCat("/dev/shm/hvd-", getpid(), "-");
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    char target[PATH_MAX];
    const ssize_t n =
        readlink(entry.path().c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string name(target, n);
    if (!absl::StartsWith(name, prefix)) continue;
    // /dev/shm/hvd-<pid>-<rank>-<random> (deleted)
    std::vector<std::string> parts = absl::StrSplit(name, '-');
    struct stat st;
    int rank = -1;
    if (parts.size() >= 4 && absl::SimpleAtoi(parts[2], &rank) &&
        stat(entry.path().c_str(), &st) == 0) {
      allocated[rank] = static_cast<int64_t>(st.st_blocks) * 512;
    }
  }
  return allocated;
}

absl::Status Exchange(Context& sender, Context& receiver, int to, int from,
                      size_t len) {
  const std::string out(len, 'm');
  std::string in(len, '\0');
  auto send = sender.Send(to, out.data(), len);
  auto recv = receiver.Recv(from, in.data(), len);
  absl::Status r = recv->Wait(Deadline());
  absl::Status s = send->Wait(Deadline());
  return s.ok() ? r : s;
}

TEST(RingReservation, StartUpReservesOnlyTheHeaders) {
  auto store = NewInMemoryStore();
  auto contexts = ConnectTwo(store.get());
  ASSERT_NE(contexts[0], nullptr);
  ASSERT_NE(contexts[1], nullptr);
  const auto headers =
      static_cast<int64_t>(shm_internal::HeadersBytes(/*num_rings=*/2));
  EXPECT_EQ(AllocatedByRank(), (std::map<int, int64_t>{{0, headers},
                                                        {1, headers}}));
}

TEST(RingReservation, SendsReserveTheirRingAsTheyFirstReachItsPages) {
  auto store = NewInMemoryStore();
  auto contexts = ConnectTwo(store.get());
  ASSERT_NE(contexts[0], nullptr);
  ASSERT_NE(contexts[1], nullptr);
  const auto headers =
      static_cast<int64_t>(shm_internal::HeadersBytes(/*num_rings=*/2));
  const auto page = static_cast<int64_t>(shm_internal::kPage);
  const auto ring = static_cast<int64_t>(kRing);
  // A small message takes one page of rank 0's ring in rank 1's segment.
  ASSERT_TRUE(Exchange(*contexts[0], *contexts[1], 1, 0, 100).ok());
  EXPECT_EQ(AllocatedByRank(),
            (std::map<int, int64_t>{{0, headers}, {1, headers + page}}));
  // It took 3 of the page's 64 slots; empty messages (a slot each) fill the
  // rest, and the next one takes one more page.
  for (int i = 0; i < 61; ++i) {
    ASSERT_TRUE(Exchange(*contexts[0], *contexts[1], 1, 0, 0).ok());
  }
  EXPECT_EQ(AllocatedByRank(),
            (std::map<int, int64_t>{{0, headers}, {1, headers + page}}));
  ASSERT_TRUE(Exchange(*contexts[0], *contexts[1], 1, 0, 0).ok());
  EXPECT_EQ(AllocatedByRank(),
            (std::map<int, int64_t>{{0, headers}, {1, headers + 2 * page}}));
  // A message larger than the ring reserves all of it, and nothing beyond.
  ASSERT_TRUE(Exchange(*contexts[0], *contexts[1], 1, 0, 3 * kRing).ok());
  EXPECT_EQ(AllocatedByRank(),
            (std::map<int, int64_t>{{0, headers}, {1, headers + ring}}));
  // The other direction has a ring of its own.
  ASSERT_TRUE(Exchange(*contexts[1], *contexts[0], 0, 1, 5000).ok());
  EXPECT_EQ(AllocatedByRank(), (std::map<int, int64_t>{{0, headers + 2 * page},
                                                        {1, headers + ring}}));
}

// ---- a full /dev/shm -------------------------------------------------------

constexpr int kCannotMount = 77;

// Gives this (single-threaded) process a /dev/shm of its own, a tmpfs of
// `size` bytes that goes away with its mount namespace; as root, or else in
// a user namespace of its own. False where neither is permitted.
bool PrivateDevShm(size_t size) {
  if (unshare(CLONE_NEWNS) != 0) {
    const uid_t uid = getuid();
    const gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    auto write = [](const char* path, const std::string& text) {
      FILE* f = fopen(path, "w");
      if (f == nullptr) return false;
      const bool ok = fputs(text.c_str(), f) >= 0;
      return fclose(f) == 0 && ok;
    };
    if (!write("/proc/self/setgroups", "deny") ||
        !write("/proc/self/uid_map", absl::StrCat(uid, " ", uid, " 1")) ||
        !write("/proc/self/gid_map", absl::StrCat(gid, " ", gid, " 1"))) {
      return false;
    }
  }
  return mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
         mount("hvd-test", "/dev/shm", "tmpfs", 0,
               absl::StrCat("size=", size, ",mode=1777").c_str()) == 0;
}

// In a child process with a 64 KiB /dev/shm, where two segments' headers fit
// but no ring does: rank 0 sends 256 KiB to rank 1. Returns what each rank's
// request ended with ("<code>\n<message>\n" each), or nothing when the
// child could not mount (it then exits kCannotMount).
std::string SendIntoAFullDevShm(int* exit_code) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    if (!PrivateDevShm(64 << 10)) _exit(kCannotMount);
    auto store = NewInMemoryStore();
    auto contexts = ConnectTwo(store.get());
    if (contexts[0] == nullptr || contexts[1] == nullptr) _exit(3);
    // Larger than the whole /dev/shm: written unreserved, it would SIGBUS.
    const std::string msg(256 << 10, 'x');
    std::string got(msg.size(), '\0');
    absl::Status sent =
        contexts[0]->Send(1, msg.data(), msg.size())->Wait(Deadline());
    absl::Status received =
        contexts[1]->Recv(0, got.data(), got.size())->Wait(Deadline());
    std::string report;
    for (const absl::Status& s : {sent, received}) {
      absl::StrAppend(&report, static_cast<int>(s.code()), "\n", s.message(),
                      "\n");
    }
    const bool written =
        ::write(fds[1], report.data(), report.size()) ==
        static_cast<ssize_t>(report.size());
    _exit(written ? 0 : 4);
  }
  close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) {
    report.append(buf, n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return report;
}

TEST(RingReservation, ASendThatFindsDevShmFullFailsBothRanksSayingWhatToDo) {
  int exit_code = -1;
  const std::string report = SendIntoAFullDevShm(&exit_code);
  if (exit_code == kCannotMount) {
    GTEST_SKIP() << "cannot mount a private /dev/shm here";
  }
  ASSERT_EQ(exit_code, 0) << "a SIGBUS is 135";
  std::vector<std::string> lines = absl::StrSplit(report, '\n');
  ASSERT_EQ(lines.size(), 5u) << report;
  const std::string reason =
      "rank 0: cannot reserve 266240 more bytes of its 1048576-byte "
      "shared-memory ring to rank 1 in /dev/shm \\(cannot allocate bytes "
      "\\[8192, 274432\\) of shared memory /hvd-[0-9]+-1-[0-9a-f]+: No space "
      "left on device\\); enlarge "
      "/dev/shm \\(e.g. docker run --shm-size\\), make HVD_SHM_RING_BYTES "
      "smaller, or set HVD_SHM=0 to connect the ranks of a host over the "
      "network";
  const std::string exhausted =
      std::to_string(static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(lines[0], exhausted);
  EXPECT_THAT(lines[1], MatchesRegex(reason));
  EXPECT_EQ(lines[2], exhausted);
  EXPECT_THAT(lines[3],
              MatchesRegex("rank 1: rank 0 on this host failed: " + reason));
}

}  // namespace
}  // namespace hvd::transport
