#include "core/transport/shm/shm_context.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/common/annotate.h"
#include "core/common/logging.h"
#include "core/transport/shm/core.h"
#include "core/transport/shm/layout.h"
#include "core/transport/shm/segment.h"
#include "core/transport/shm/shm_context_impl.h"

namespace hvd::transport {
namespace {

using shm_internal::Segment;
using shm_internal::SegmentHeader;

// The store key under which `rank` lists the local ranks whose segments it
// mapped ("1,3"; empty when none).
std::string AttachedKey(int rank) {
  return absl::StrCat("shm/", rank, "/attached");
}

uint64_t RandomU64() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// Which PID namespace we are in: a peer in another one cannot be watched
// with kill(pid, 0), so such a pair is not connected.
std::string PidNamespace() {
  char buf[64];
  const ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof(buf));
  return n > 0 ? std::string(buf, n) : "unknown";
}

// Published by a rank that could not create its segment.
constexpr char kNoSegment[] = "none";

// What a rank publishes about its segment: "name cookie pid pid-namespace".
struct Record {
  std::string name;
  uint64_t cookie = 0;
  int pid = 0;
  std::string pid_ns;
};

std::string Encode(const Record& r) {
  return absl::StrCat(r.name, " ", r.cookie, " ", r.pid, " ", r.pid_ns);
}

bool Decode(absl::string_view text, Record* r) {
  std::vector<std::string> parts = absl::StrSplit(text, ' ');
  return parts.size() == 4 && (r->name = parts[0], true) &&
         absl::SimpleAtoi(parts[1], &r->cookie) &&
         absl::SimpleAtoi(parts[2], &r->pid) && (r->pid_ns = parts[3], true);
}

// A peer's segment, mapped and checked, and the ring size its header gave
// when it was checked (the header is not trusted again).
struct Attached {
  std::unique_ptr<Segment> segment;
  size_t ring_bytes = 0;
};

// What a peer's header claims, read once: the peer can write it at any
// time, so what was checked is what is used.
struct Claims {
  uint64_t magic, cookie;
  int32_t pid, rank;
  uint32_t num_rings;
  uint64_t ring_bytes;
};

Claims ReadClaims(const Segment& segment) {
  const auto* h = reinterpret_cast<const SegmentHeader*>(segment.data());
  return {h->magic, h->cookie, h->pid, h->rank, h->num_rings, h->ring_bytes};
}

// Why `c`, the claims of a segment `bytes` long, do not describe rings this
// rank can use: `num_rings` of whole slots, at least two each, that fit in
// the segment. Empty if they do.
std::string RingsMismatch(const Claims& c, size_t bytes, uint32_t num_rings) {
  // ring_bytes <= bytes first: SegmentBytes cannot overflow after it.
  if (c.num_rings == num_rings && c.ring_bytes >= 2 * shm_internal::kSlot &&
      c.ring_bytes % shm_internal::kSlot == 0 && c.ring_bytes <= bytes &&
      shm_internal::SegmentBytes(num_rings, c.ring_bytes) <= bytes) {
    return "";
  }
  return absl::StrCat("it has ", c.num_rings, " rings of ", c.ring_bytes,
                      " bytes in ", bytes, " bytes for ", num_rings,
                      " local ranks");
}

// Maps `peer`'s segment and checks it is what was published; the reason
// otherwise.
absl::StatusOr<Attached> Attach(int peer, const Record& record,
                                uint32_t num_rings,
                                const std::string& pid_ns) {
  if (record.pid_ns != pid_ns) {
    return absl::FailedPreconditionError(
        absl::StrCat("it runs in PID namespace ", record.pid_ns, ", not ",
                     pid_ns));
  }
  auto segment = Segment::Open(record.name);
  if (!segment.ok()) return segment.status();
  if ((*segment)->size() < sizeof(SegmentHeader)) {
    return absl::FailedPreconditionError(
        absl::StrCat(record.name, " is only ", (*segment)->size(), " bytes"));
  }
  const Claims h = ReadClaims(**segment);
  std::string mismatch;
  if (h.magic != shm_internal::kMagic) {
    mismatch = "its layout version differs";
  } else if (h.cookie != record.cookie || h.rank != peer ||
             h.pid != record.pid) {
    mismatch = absl::StrCat("it belongs to rank ", h.rank, " pid ", h.pid,
                            ", not rank ", peer, " pid ", record.pid);
  } else {
    mismatch = RingsMismatch(h, (*segment)->size(), num_rings);
  }
  if (!mismatch.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        record.name, " is not the segment rank ", peer, " published: ",
        mismatch));
  }
  return Attached{*std::move(segment), h.ring_bytes};
}

absl::Status CheckArguments(int rank, int size,
                            const std::vector<int>& local_ranks, Store* store) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateShmContext: rank ", rank, " is not in a job of size ", size));
  }
  std::set<int> seen;
  for (int r : local_ranks) {
    if (r < 0 || r >= size || !seen.insert(r).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CreateShmContext: local ranks [", absl::StrJoin(local_ranks, ","),
          "] repeat a rank or leave the job of size ", size));
    }
  }
  if (seen.count(rank) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateShmContext: local ranks [",
                     absl::StrJoin(local_ranks, ","), "] lack rank ", rank));
  }
  if (store == nullptr && local_ranks.size() > 1) {
    return absl::InvalidArgumentError("CreateShmContext: no store");
  }
  return absl::OkStatus();
}

// This rank's record and segment, its header filled in.
absl::StatusOr<std::unique_ptr<Segment>> CreateOwnSegment(
    int rank, uint32_t num_rings, const shm_internal::Tuning& tuning,
    Record* own) {
  own->cookie = RandomU64();
  own->pid = getpid();
  own->pid_ns = PidNamespace();
  own->name = absl::StrCat("/hvd-", own->pid, "-", rank, "-",
                           absl::Hex(RandomU64(), absl::kZeroPad16));
  // Only the headers are reserved now; each ring is, by its writer, as its
  // sends first reach its pages (SendChannel).
  auto segment = Segment::Create(
      own->name, shm_internal::SegmentBytes(num_rings, tuning.ring_bytes),
      shm_internal::HeadersBytes(num_rings));
  if (!segment.ok()) return segment.status();
  auto* header = reinterpret_cast<SegmentHeader*>((*segment)->data());
  header->cookie = own->cookie;
  header->pid = own->pid;
  header->rank = rank;
  header->num_rings = num_rings;
  header->ring_bytes = tuning.ring_bytes;
  header->magic = shm_internal::kMagic;
  return segment;
}

// A rank with no segment still takes part in the agreement, so that its
// peers do not wait for it.
absl::Status PublishNoSegment(int rank, uint32_t num_rings, Store* store) {
  if (num_rings <= 1) return absl::OkStatus();
  if (absl::Status s = store->Set(absl::StrCat("shm/", rank), kNoSegment);
      !s.ok()) {
    return s;
  }
  return store->Set(AttachedKey(rank), "");
}

// Publishes `own`, maps every local peer's segment that can be mapped (into
// `attached`, by rank), and publishes which it mapped. Returns those ranks.
absl::StatusOr<std::vector<int>> AttachPeers(
    int rank, const std::vector<int>& local_ranks, const Record& own,
    Store* store, absl::Time deadline,
    std::vector<Attached>& attached) {
  const auto num_rings = static_cast<uint32_t>(local_ranks.size());
  std::vector<int> attached_ranks;
  if (absl::Status s = store->Set(absl::StrCat("shm/", rank), Encode(own));
      !s.ok()) {
    return Annotate(s, absl::StrCat("rank ", rank,
                                    ": publishing the shared-memory "
                                    "segment name"));
  }
  std::vector<int> peers;
  for (int peer : local_ranks) {
    if (peer != rank) peers.push_back(peer);
  }
  auto values = GetOfRanks(*store, "shm/", peers, deadline - absl::Now());
  if (!values.ok()) {
    return Annotate(values.status(),
                    absl::StrCat("rank ", rank, ": reading the local peers' "
                                 "shared-memory segment names"));
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    const int peer = peers[i];
    const std::string& value = (*values)[i];
    Record record;
    if (value == kNoSegment) continue;  // It logged why.
    absl::StatusOr<Attached> mapped =
        Decode(value, &record)
            ? Attach(peer, record, num_rings, own.pid_ns)
            : absl::InvalidArgumentError(
                  absl::StrCat("unreadable record '", value, "'"));
    if (!mapped.ok()) {
      HVD_LOG(WARNING) << "rank " << rank << ": cannot share memory with "
                       << "rank " << peer << " on this host ("
                       << mapped.status().message()
                       << "); that pair uses the network transport";
      continue;
    }
    attached[peer] = *std::move(mapped);
    attached_ranks.push_back(peer);
  }
  if (absl::Status s = store->Set(AttachedKey(rank),
                                  absl::StrJoin(attached_ranks, ","));
      !s.ok()) {
    return Annotate(s, absl::StrCat("rank ", rank,
                                    ": publishing shared-memory peers"));
  }
  return attached_ranks;
}

// Of the peers this rank mapped, those that mapped this rank too (by rank).
absl::StatusOr<std::vector<bool>> MutualPeers(
    int rank, int size, const std::vector<int>& attached_ranks, Store* store,
    absl::Time deadline) {
  std::vector<bool> mutual(size, false);
  if (attached_ranks.empty()) return mutual;
  std::vector<std::string> keys;
  for (int peer : attached_ranks) {
    keys.push_back(AttachedKey(peer));
  }
  auto values = store->GetMany(keys, deadline - absl::Now());
  if (!values.ok()) {
    return Annotate(values.status(),
                    absl::StrCat("rank ", rank, ": reading which ranks the "
                                 "local peers mapped"));
  }
  for (size_t i = 0; i < attached_ranks.size(); ++i) {
    const int peer = attached_ranks[i];
    for (absl::string_view r :
         absl::StrSplit((*values)[i], ',', absl::SkipEmpty())) {
      int other = -1;
      if (absl::SimpleAtoi(r, &other) && other == rank) mutual[peer] = true;
    }
    if (!mutual[peer]) {
      HVD_LOG(WARNING) << "rank " << rank << ": rank " << peer
                       << " cannot map this rank's shared memory; that pair "
                       << "uses the network transport";
    }
  }
  return mutual;
}

}  // namespace

absl::StatusOr<ShmMesh> CreateShmContext(int rank, int size,
                                         const std::vector<int>& local_ranks,
                                         Store* store,
                                         const ShmOptions& options) {
  if (absl::Status s = CheckArguments(rank, size, local_ranks, store);
      !s.ok()) {
    return s;
  }
  const shm_internal::Tuning tuning = shm_internal::TuningFrom(options.tuning);
  const auto num_rings = static_cast<uint32_t>(local_ranks.size());
  auto index_of = [&](int r) {
    return static_cast<uint32_t>(
        std::find(local_ranks.begin(), local_ranks.end(), r) -
        local_ranks.begin());
  };
  Record own;
  auto segment = CreateOwnSegment(rank, num_rings, tuning, &own);
  if (!segment.ok()) {
    HVD_LOG(WARNING) << "rank " << rank << ": no shared-memory transport ("
                     << segment.status().message()
                     << "); this rank's local peers use the network";
    if (absl::Status s = PublishNoSegment(rank, num_rings, store); !s.ok()) {
      return s;
    }
    return ShmMesh{};
  }
  // Peers attach between our publication and the end of the agreement
  // round; the name goes as soon as both are done (or when `segment` is
  // destroyed on an error path).
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  std::vector<Attached> attached(size);
  std::vector<int> attached_ranks;
  if (num_rings > 1) {
    auto ranks = AttachPeers(rank, local_ranks, own, store, deadline, attached);
    if (!ranks.ok()) return ranks.status();
    attached_ranks = *std::move(ranks);
  }
  auto mutual = MutualPeers(rank, size, attached_ranks, store, deadline);
  if (!mutual.ok()) return mutual.status();
  // Every peer that meant to attach has now said it is done.
  (*segment)->Unlink();
  auto core = std::make_shared<shm_internal::Core>(rank, size, tuning,
                                                   *std::move(segment));
  ShmMesh mesh;
  for (int peer : attached_ranks) {
    if (!(*mutual)[peer]) continue;
    core->AddPeer(peer, std::move(attached[peer].segment), num_rings,
                  attached[peer].ring_bytes, index_of(rank), index_of(peer));
    mesh.peers.push_back(peer);
  }
  core->Start();
  std::sort(mesh.peers.begin(), mesh.peers.end());
  mesh.context = std::make_unique<shm_internal::ShmContext>(std::move(core));
  return mesh;
}

}  // namespace hvd::transport
