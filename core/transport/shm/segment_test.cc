// What a segment costs: the pages reserved in /dev/shm (the object's
// allocated blocks), and of a mapping, that a peer's segment is mapped
// without its pages and Prefault maps just the range a rank uses (the
// mapping's resident set in /proc/self/smaps).
#include "core/transport/shm/segment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/transport/shm/layout.h"
#include "gtest/gtest.h"

namespace hvd::transport::shm_internal {
namespace {

// Resident KiB of the mapping that starts at `at`; -1 if there is none.
int64_t ResidentKib(const char* at) {
  std::ifstream smaps("/proc/self/smaps");
  const std::string start = absl::StrCat(
      absl::Hex(reinterpret_cast<uintptr_t>(at)), "-");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(start, 0) == 0) {
      in_mapping = true;
    } else if (in_mapping && line.rfind("Rss:", 0) == 0) {
      std::vector<std::string> fields =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t kib = -1;
      return fields.size() >= 2 && absl::SimpleAtoi(fields[1], &kib) ? kib
                                                                      : -1;
    }
  }
  return -1;
}

// Bytes of the object `name` allocated in /dev/shm; -1 if there is none.
int64_t AllocatedBytes(const std::string& name) {
  struct stat st;
  if (stat(absl::StrCat("/dev/shm", name).c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_blocks) * 512;
}

TEST(Segment, CreationReservesAndMapsOnlyTheReservedPrefix) {
  const std::string name = absl::StrCat("/hvd-segment-test-", getpid());
  constexpr size_t kBytes = size_t{8} << 20;
  auto own = Segment::Create(name, kBytes, 2 * kPage);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ((*own)->size(), kBytes);
  EXPECT_EQ(AllocatedBytes(name), 2 * kPage);
  EXPECT_EQ(ResidentKib((*own)->data()), 8);
}

TEST(Segment, ReserveAllocatesARangeOnceAndClipsItAtTheEnd) {
  const std::string name = absl::StrCat("/hvd-segment-test-", getpid());
  constexpr size_t kBytes = size_t{8} << 20;
  auto own = Segment::Create(name, kBytes, kPage);
  ASSERT_TRUE(own.ok()) << own.status();
  auto peer = Segment::Open(name);
  ASSERT_TRUE(peer.ok()) << peer.status();
  // The writer reserves, through its own mapping of the object.
  ASSERT_TRUE((*peer)->Reserve(size_t{1} << 20, size_t{1} << 20).ok());
  EXPECT_EQ(AllocatedBytes(name), kPage + (1 << 20));
  ASSERT_TRUE((*peer)->Reserve(size_t{1} << 20, size_t{1} << 20).ok());
  EXPECT_EQ(AllocatedBytes(name), kPage + (1 << 20));
  ASSERT_TRUE((*peer)->Reserve(kBytes - kPage, size_t{1} << 20).ok());
  ASSERT_TRUE((*peer)->Reserve(kBytes, 1).ok());
  EXPECT_EQ(AllocatedBytes(name), 2 * kPage + (1 << 20));
  EXPECT_EQ((*own)->size(), kBytes);  // clipped: the object did not grow
  EXPECT_EQ(ResidentKib((*peer)->data()), 0);  // reserving maps nothing
}

TEST(Segment, APeersSegmentIsMappedWithoutItsPagesUntilPrefaulted) {
  const std::string name = absl::StrCat("/hvd-segment-test-", getpid());
  constexpr size_t kBytes = size_t{8} << 20;
  auto own = Segment::Create(name, kBytes, kBytes);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(ResidentKib((*own)->data()), 8 << 10);  // it reserved it all

  auto peer = Segment::Open(name);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(ResidentKib((*peer)->data()), 0);
  (*peer)->Prefault(kPage, size_t{1} << 20);  // one ring's worth
  EXPECT_EQ(ResidentKib((*peer)->data()), 1 << 10);
  (*peer)->Prefault(kBytes - 10, 100);  // clipped at the end
  EXPECT_EQ(ResidentKib((*peer)->data()), (1 << 10) + 4);
}

}  // namespace
}  // namespace hvd::transport::shm_internal
