// Fuzzes what a shared-memory peer controls: a real rank 0 context attaches
// to the segment of rank 1, played by this harness, whose header (layout
// version, identity, ring count and size, failure state and reason) comes
// from the input, then finds the rest of the input in its inbound ring from
// rank 1 (the head cursor and the bytes: message length slots and data).
// Rank 0 then receives a message of any length and one of 64 bytes, and
// sends one of 64 bytes and one larger than a ring: whatever the bytes, the attach must refuse or the
// operations fail or succeed cleanly (no crash, no access outside the
// mapping, no unbounded allocation, no hang past the deadline).
//
// Input, little-endian, read from the front (missing bytes read as zero):
//   u8  flags: 1 garbage layout version, 2 wrong cookie, 4 the rank below,
//              8 the ring count below, 16 the ring size below, 32 the
//              segment size below, 64 the head cursor below
//   u32 rank, u32 ring count, u64 ring size, u32 segment size,
//   u32 state, i32 reason code, 64 bytes of reason, u64 head cursor,
//   then the bytes of the inbound ring.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/rendezvous/store.h"
#include "core/transport/shm/layout.h"
#include "core/transport/shm/segment.h"
#include "core/transport/shm/shm_context.h"
#include "tools/fuzz/input_reader.h"

namespace {

namespace shm = hvd::transport::shm_internal;
constexpr size_t kRingBytes = 4096;
constexpr uint32_t kRings = 2;

std::string PidNamespace() {
  char buf[64];
  const ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof(buf));
  return n > 0 ? std::string(buf, n) : "unknown";
}

// Rank 1's segment: a correct header, then whatever the input overrides.
std::unique_ptr<shm::Segment> PeerSegment(hvd::fuzz::InputReader& in, uint64_t cookie) {
  // Unique across runs too: a run that stopped on a finding leaves its
  // segments behind.
  static const uint64_t run = std::random_device()();
  static int serial = 0;
  const auto flags = in.Take<uint8_t>();
  const auto rank = in.Take<uint32_t>();
  const auto rings = in.Take<uint32_t>();
  const auto ring_bytes = in.Take<uint64_t>();
  const auto segment_bytes = in.Take<uint32_t>();
  const size_t full = shm::SegmentBytes(kRings, kRingBytes);
  auto segment = shm::Segment::Create(
      absl::StrCat("/hvd-fuzz-", getpid(), "-", run, "-", serial++),
      flags & 32 ? std::clamp<size_t>(segment_bytes, 1, full) : full, full);
  if (!segment.ok()) return nullptr;
  if ((*segment)->size() < sizeof(shm::SegmentHeader)) {
    return *std::move(segment);
  }
  auto* h = reinterpret_cast<shm::SegmentHeader*>((*segment)->data());
  h->magic = flags & 1 ? 0x1234 : shm::kMagic;
  h->cookie = flags & 2 ? ~cookie : cookie;
  h->pid = getpid();
  h->rank = flags & 4 ? static_cast<int32_t>(rank) : 1;
  h->num_rings = flags & 8 ? rings : kRings;
  h->ring_bytes = flags & 16 ? ring_bytes : kRingBytes;
  h->state.store(in.Take<uint32_t>());
  h->reason_code = in.Take<int32_t>();
  in.TakeBytes(h->reason, 64);
  return *std::move(segment);
}

// Writes the rest of the input into rank 0's inbound ring from rank 1.
void FillInboundRing(hvd::fuzz::InputReader& in, shm::Segment& rank0, bool set_head) {
  const auto head = in.Take<uint64_t>();
  auto* ring = reinterpret_cast<shm::RingHeader*>(
      rank0.data() + shm::kRingHeadersOffset + 1 * sizeof(shm::RingHeader));
  char* data = rank0.data() + shm::RingDataOffset(kRings, kRingBytes, 1);
  const size_t n = std::min(in.left(), kRingBytes);
  in.TakeBytes(data, n);
  ring->head.store(set_head ? head : shm::RoundUp(n, shm::kSlot));
}

// Whether rank 1's header describes a segment rank 0 may use: its own
// identity, two rings of whole slots (at least two each) that fit in the
// mapping, counted without overflow.
bool Usable(const shm::Segment& segment, uint64_t cookie) {
  if (segment.size() < sizeof(shm::SegmentHeader)) return false;
  const auto* h = reinterpret_cast<const shm::SegmentHeader*>(segment.data());
  if (h->magic != shm::kMagic || h->cookie != cookie || h->rank != 1 ||
      h->pid != getpid() || h->num_rings != kRings) {
    return false;
  }
  const unsigned __int128 ring = h->ring_bytes;
  const unsigned __int128 pages =
      (ring + shm::kPage - 1) / shm::kPage * shm::kPage;
  return ring >= 2 * shm::kSlot && ring % shm::kSlot == 0 &&
         shm::kRingHeadersOffset + shm::kPage + kRings * pages <=
             segment.size();
}

[[noreturn]] void SetUpFailed(const std::string& why) {
  // Not a finding about the input: the harness could not set up the job.
  std::fprintf(stderr, "segment_fuzzer: set-up failed (%s)\n", why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hvd::fuzz::InputReader in(data, size);
  const bool set_head = size > 0 && (data[0] & 64);
  std::unique_ptr<hvd::Store> store = hvd::NewInMemoryStore();
  const uint64_t cookie = 0x5eed;
  std::unique_ptr<shm::Segment> mine = PeerSegment(in, cookie);
  if (mine == nullptr) SetUpFailed("rank 1 could not create its segment");
  hvd::transport::ShmOptions options;
  options.connect_timeout = absl::Seconds(5);
  options.tuning.ring_bytes = kRingBytes;
  absl::StatusOr<hvd::transport::ShmMesh> rank0;
  std::thread attach([&] {
    rank0 = hvd::transport::CreateShmContext(0, 2, {0, 1}, store.get(),
                                             options);
  });
  store->Set("shm/1", absl::StrCat(mine->name(), " ", cookie, " ", getpid(),
                                   " ", PidNamespace()))
      .IgnoreError();
  auto record = store->Get("shm/0", absl::Seconds(5));
  std::unique_ptr<shm::Segment> theirs;
  if (record.ok()) {
    std::vector<std::string> parts = absl::StrSplit(*record, ' ');
    auto opened = shm::Segment::Open(parts[0]);
    if (opened.ok()) theirs = *std::move(opened);
  }
  store->Set("shm/1/attached", "0").IgnoreError();
  attach.join();
  if (!rank0.ok()) SetUpFailed(rank0.status().ToString());
  // Refused (rank 0 then unlinks its segment without waiting for rank 1).
  if (rank0->context == nullptr || rank0->peers.empty()) return 0;
  if (theirs == nullptr) SetUpFailed("rank 1 could not map rank 0's segment");
  if (!Usable(*mine, cookie)) {
    std::fprintf(stderr, "segment_fuzzer: rank 0 took a segment whose header "
                         "does not describe it\n");
    std::abort();
  }
  FillInboundRing(in, *theirs, set_head);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(20);
  auto& context = *rank0->context;
  std::string any;
  context.RecvAny(1, &any)->Wait(deadline).IgnoreError();
  char fixed[64] = {};
  context.Recv(1, fixed, sizeof(fixed))->Wait(deadline).IgnoreError();
  context.Send(1, fixed, sizeof(fixed))->Wait(deadline).IgnoreError();
  // More than the ring holds: the writer wraps around rank 1's ring.
  const std::string large(4 * kRingBytes, 'x');
  context.Send(1, large.data(), large.size())->Wait(deadline).IgnoreError();
  return 0;
}
