#include "core/collectives/internal.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/common/huge_pages.h"

namespace hvd::collectives::internal {

std::vector<Span> Layout(const std::vector<size_t>& bytes) {
  std::vector<Span> spans;
  spans.reserve(bytes.size());
  size_t offset = 0;
  for (size_t b : bytes) {
    spans.push_back({offset, b});
    offset += b;
  }
  return spans;
}

std::vector<Span> EvenBlocks(size_t count, int n, size_t elem_size) {
  std::vector<size_t> bytes(n);
  const size_t base = count / n;
  const size_t extra = count % n;
  for (int i = 0; i < n; ++i) {
    bytes[i] = (base + (static_cast<size_t>(i) < extra ? 1 : 0)) * elem_size;
  }
  return Layout(bytes);
}

std::vector<Span> Chunks(Span span, size_t chunk_bytes, size_t elem_size) {
  const size_t step = std::max<size_t>(1, chunk_bytes / elem_size) * elem_size;
  std::vector<Span> chunks;
  chunks.reserve((span.bytes + step - 1) / step);
  for (size_t done = 0; done < span.bytes; done += step) {
    chunks.push_back({span.offset + done, std::min(step, span.bytes - done)});
  }
  return chunks;
}

std::vector<Span> ChunksBetween(Span span, size_t chunk_bytes,
                                size_t elem_size,
                                const std::vector<size_t>& cuts) {
  if (cuts.empty()) return Chunks(span, chunk_bytes, elem_size);
  std::vector<Span> chunks;
  const size_t end = span.offset + span.bytes;
  size_t at = span.offset;
  auto cut = std::upper_bound(cuts.begin(), cuts.end(), at);
  while (at < end) {
    const size_t stop = cut != cuts.end() && *cut < end ? *cut : end;
    for (const Span& c : Chunks({at, stop - at}, chunk_bytes, elem_size)) {
      chunks.push_back(c);
    }
    at = stop;
    if (cut != cuts.end()) ++cut;
  }
  return chunks;
}

DataView::DataView(const std::vector<std::pair<char*, size_t>>& pieces) {
  size_t offset = 0;
  for (const auto& [base, bytes] : pieces) {
    if (bytes == 0) continue;
    if (!starts_.empty()) cuts_.push_back(offset);
    bases_.push_back(base);
    starts_.push_back(offset);
    offset += bytes;
  }
}

char* DataView::At(size_t offset) const {
  if (bases_.empty()) return data_ + offset;
  const size_t i =
      std::upper_bound(starts_.begin(), starts_.end(), offset) -
      starts_.begin() - 1;
  return bases_[i] + (offset - starts_[i]);
}

char* DataView::Contiguous(size_t offset, size_t bytes) const {
  if (bases_.empty()) return data_ + offset;
  auto cut = std::upper_bound(cuts_.begin(), cuts_.end(), offset);
  if (cut != cuts_.end() && *cut < offset + bytes) return nullptr;
  return At(offset);
}

std::vector<std::pair<char*, size_t>> DataView::Ranges(size_t offset,
                                                       size_t bytes) const {
  std::vector<std::pair<char*, size_t>> ranges;
  const size_t end = offset + bytes;
  auto cut = std::upper_bound(cuts_.begin(), cuts_.end(), offset);
  while (offset < end) {
    const size_t stop = cut != cuts_.end() && *cut < end ? *cut : end;
    ranges.emplace_back(At(offset), stop - offset);
    offset = stop;
    if (cut != cuts_.end()) ++cut;
  }
  return ranges;
}

DataView DataView::Slice(size_t offset) const {
  if (bases_.empty()) return DataView(data_ + offset);
  DataView view;
  for (size_t i = 0; i < bases_.size(); ++i) {
    const size_t end =
        i + 1 < starts_.size() ? starts_[i + 1] : static_cast<size_t>(-1);
    if (end <= offset) continue;
    const size_t skip = offset > starts_[i] ? offset - starts_[i] : 0;
    if (!view.starts_.empty()) view.cuts_.push_back(starts_[i] - offset);
    view.bases_.push_back(bases_[i] + skip);
    view.starts_.push_back(starts_[i] + skip - offset);
  }
  return view;
}

absl::Status CheckGroup(const transport::Context& context, const Group& group,
                        absl::string_view collective) {
  if (group.size() == 0 || group.index < 0 || group.index >= group.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(collective, ": group index ", group.index,
                     " is outside a group of ", group.size()));
  }
  for (int r : group.ranks) {
    if (r < 0 || r >= context.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(collective, ": group member rank ", r,
                       " is outside the context of size ", context.size()));
    }
  }
  // A process set's ranks ascend, so no copy and sort is needed to see
  // that no rank is listed twice (this runs on every call, and a group can
  // hold every rank of the job).
  const bool ascending = std::adjacent_find(group.ranks.begin(),
                                            group.ranks.end(),
                                            std::greater_equal<int>()) ==
                         group.ranks.end();
  if (!ascending) {
    std::vector<int> sorted = group.ranks;
    std::sort(sorted.begin(), sorted.end());
    if (auto dup = std::adjacent_find(sorted.begin(), sorted.end());
        dup != sorted.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(collective, ": group lists rank ", *dup, " twice"));
    }
  }
  if (group.ranks[group.index] != context.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat(collective, ": group member ", group.index, " is rank ",
                     group.ranks[group.index], " but this context is rank ",
                     context.rank()));
  }
  return absl::OkStatus();
}

absl::Status CheckReduceOp(ReduceOp op, absl::string_view collective) {
  if (op == ReduceOp::kSum || op == ReduceOp::kMin || op == ReduceOp::kMax ||
      op == ReduceOp::kProduct) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(collective, ": op ", ReduceOpName(op),
                   " is not Sum, Min, Max or Product"));
}

size_t SmallMessageBytes(const CollectiveOptions& options, const Group& group) {
  const std::vector<int>& hosts = options.hosts;
  bool several_hosts = false;
  for (int r : group.ranks) {
    if (r < 0 || static_cast<size_t>(r) >= hosts.size()) {
      return options.small_message_bytes;
    }
    several_hosts |= hosts[r] != hosts[group.ranks[0]];
  }
  return several_hosts ? options.cross_host_small_message_bytes
                       : options.small_message_bytes;
}

bool UseDirect(const CollectiveOptions& options, const Group& group,
               size_t bytes) {
  switch (options.algorithm) {
    case AllreduceAlgorithm::kDirect:
    case AllreduceAlgorithm::kRecursiveDoubling:
      return true;
    case AllreduceAlgorithm::kRing:
      return false;
    case AllreduceAlgorithm::kAuto:
    case AllreduceAlgorithm::kHierarchical:
      return bytes <= SmallMessageBytes(options, group);
  }
  return false;
}

transport::WaitLimits LimitsOf(const CollectiveOptions& options) {
  return {options.timeout, options.stall_warning};
}

absl::Status Wait(transport::Request& request,
                  const transport::WaitLimits& limits) {
  return transport::WaitNamingStalls(request, absl::Now(), limits,
                                     "a transfer");
}

absl::Status WaitAll(const std::vector<RequestPtr>& requests,
                     const transport::WaitLimits& limits) {
  for (const RequestPtr& request : requests) {
    if (request == nullptr) continue;
    absl::Status status = Wait(*request, limits);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

void PostRecvsFromOthers(transport::Context& context, const Group& group,
                         char* output, const std::vector<Span>& blocks,
                         std::vector<RequestPtr>* requests) {
  const int n = group.size();
  for (int k = 1; k < n; ++k) {
    const int j = Mod(group.index - k, n);
    if (blocks[j].bytes == 0) continue;
    requests->push_back(context.Recv(group.ranks[j], output + blocks[j].offset,
                                     blocks[j].bytes));
  }
}

bool AllDone(const std::vector<RequestPtr>& requests) {
  return std::all_of(requests.begin(), requests.end(),
                     [](const RequestPtr& r) { return !r || r->Done(); });
}

absl::Status Annotate(const absl::Status& status, absl::string_view collective,
                      const transport::Context& context, const Group& group) {
  if (status.ok()) return status;
  return absl::Status(
      status.code(),
      absl::StrCat(collective, " on rank ", context.rank(), " (member ",
                   group.index, " of ", group.size(), "): ", status.message()));
}

namespace {

// The large scratch buffers freed last in this process, kept for the next
// collectives on whichever thread runs them (the background thread, or a
// caller running the cycles): fresh memory costs a page fault and a zeroed
// page per page touched (tens of milliseconds for 64 MiB here), more than
// the data movement. Two slots, because a ring over a working buffer holds
// two at once (the working buffer and the pipeline's chunk slots); not one
// per thread, so that the threads running cycles do not each keep copies.
struct CachedScratch {
  absl::Mutex mu;
  char* data[2] ABSL_GUARDED_BY(mu) = {};
  size_t capacity[2] ABSL_GUARDED_BY(mu) = {};
  int older ABSL_GUARDED_BY(mu) = 0;  // the slot a third buffer evicts
};

// Scratch of at least this many bytes is mapped and kept (above) rather
// than malloc'd: glibc hands freed blocks of this size back to the kernel
// (its trim) often enough that the next collective of the size pays fresh,
// zeroed pages again. Measured: a 1-4 MiB reducescatter took 0.6-2.3 ms
// that way, 0.04-0.25 ms with malloc told to keep its memory.
constexpr size_t kCachedScratchMinBytes = size_t{256} << 10;

CachedScratch& ScratchCache() {
  static CachedScratch* cache = new CachedScratch;  // mapped until exit
  return *cache;
}

char* AllocateScratch(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes < kCachedScratchMinBytes) {
    return static_cast<char*>(std::malloc(bytes));
  }
  const size_t capacity = HugePageCapacity(bytes);
  CachedScratch& cache = ScratchCache();
  {
    absl::MutexLock lock(&cache.mu);
    for (int i = 0; i < 2; ++i) {
      if (cache.data[i] != nullptr && cache.capacity[i] == capacity) {
        char* p = cache.data[i];
        cache.data[i] = nullptr;
        return p;
      }
    }
  }
  return static_cast<char*>(MapHugePages(capacity));
}

void FreeScratch(char* data, size_t bytes) {
  if (data == nullptr) return;
  if (bytes < kCachedScratchMinBytes) {
    std::free(data);
    return;
  }
  CachedScratch& cache = ScratchCache();
  char* evicted;
  size_t evicted_capacity;
  {
    absl::MutexLock lock(&cache.mu);
    // An empty slot first; else the one filled longer ago.
    const int slot = cache.data[0] == nullptr   ? 0
                     : cache.data[1] == nullptr ? 1
                                                : cache.older;
    evicted = cache.data[slot];
    evicted_capacity = cache.capacity[slot];
    cache.data[slot] = data;
    cache.capacity[slot] = HugePageCapacity(bytes);
    cache.older = 1 - slot;
  }
  UnmapHugePages(evicted, evicted_capacity);
}

}  // namespace

Scratch::Scratch(size_t bytes) : data_(AllocateScratch(bytes)), bytes_(bytes) {
  if (bytes > 0 && data_ == nullptr) throw std::bad_alloc();
}

Scratch::~Scratch() { FreeScratch(data_, bytes_); }

void Scratch::AbandonIfPending(const std::vector<RequestPtr>& pending) {
  if (AllDone(pending)) return;
  // Kept, not freed (see the header), and reachable: a failed job's
  // quarantine, not a leak. Failures end the job, so it stays small.
  static auto* quarantine = new std::vector<char*>;
  static auto* mu = new absl::Mutex;
  absl::MutexLock lock(mu);
  quarantine->push_back(data_);
  data_ = nullptr;
}

}  // namespace hvd::collectives::internal
