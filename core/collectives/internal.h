// Helpers shared by the collective algorithms: byte spans and their chunking,
// group checks, waits with per-wait deadlines, and error annotation.
#ifndef HVD_CORE_COLLECTIVES_INTERNAL_H_
#define HVD_CORE_COLLECTIVES_INTERNAL_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/collectives/options.h"
#include "core/common/types.h"
#include "core/transport/stall_wait.h"
#include "core/transport/transport.h"

namespace hvd::collectives::internal {

using RequestPtr = std::unique_ptr<transport::Request>;

// A byte range of a buffer.
struct Span {
  size_t offset = 0;
  size_t bytes = 0;
};

// a mod n, in [0, n).
inline int Mod(int a, int n) { return ((a % n) + n) % n; }

// The blocks of consecutive sizes `bytes[i]`, laid out back to back.
std::vector<Span> Layout(const std::vector<size_t>& bytes);

// `count` elements split into `n` blocks whose sizes differ by at most one
// element (the first count % n get the extra one).
std::vector<Span> EvenBlocks(size_t count, int n, size_t elem_size);

// `span` split into pieces of at most `chunk_bytes` (at least one element),
// each a whole number of elements. An empty span has no chunks. Sender and
// receiver compute the same chunks from the same arguments, which is what
// lets every message have an exactly known length.
std::vector<Span> Chunks(Span span, size_t chunk_bytes, size_t elem_size);

// `span` split like Chunks(), and also at every offset in `cuts` (ascending)
// that falls inside it, so that no chunk crosses a cut.
std::vector<Span> ChunksBetween(Span span, size_t chunk_bytes, size_t elem_size,
                                const std::vector<size_t>& cuts);

// The bytes a collective works on, addressed by offset: one buffer, or
// several laid end to end as if one (the tensors of a fused response,
// reduced where they are instead of copied together). A range that crosses
// no cut() is contiguous at At(offset). Does not own the memory.
class DataView {
 public:
  explicit DataView(char* data) : data_(data) {}
  // `pieces`: (start, bytes); empty pieces are dropped.
  explicit DataView(const std::vector<std::pair<char*, size_t>>& pieces);

  char* At(size_t offset) const;
  // Where pieces meet (offsets in the concatenation); empty for one buffer.
  const std::vector<size_t>& cuts() const { return cuts_; }
  // A pointer to [offset, offset + bytes) if contiguous, else nullptr.
  char* Contiguous(size_t offset, size_t bytes) const;
  // The view from `offset` on (offsets then count from there).
  DataView Slice(size_t offset) const;
  // [offset, offset + bytes) as contiguous ranges, in order.
  std::vector<std::pair<char*, size_t>> Ranges(size_t offset,
                                               size_t bytes) const;

 private:
  DataView() = default;
  char* data_ = nullptr;        // one buffer
  std::vector<char*> bases_;    // pieces: start of each
  std::vector<size_t> starts_;  // pieces: offset of each
  std::vector<size_t> cuts_;    // starts_ without the first
};

// OK if `group` is well formed and this context is its member `index`;
// InvalidArgument naming `collective` and the mismatch otherwise.
absl::Status CheckGroup(const transport::Context& context, const Group& group,
                        absl::string_view collective);

// OK if `op` is Sum, Min, Max or Product; InvalidArgument naming
// `collective` otherwise (Average is Sum then Scale, done by the caller).
absl::Status CheckReduceOp(ReduceOp op, absl::string_view collective);

// The size up to which kAuto sends everything in one direct round:
// options.cross_host_small_message_bytes when options.hosts puts the group
// on several hosts, else options.small_message_bytes.
size_t SmallMessageBytes(const CollectiveOptions& options, const Group& group);

// Whether a collective of `bytes` over `group` takes a small-message
// algorithm: the one-round direct one, or the log N one (UseDoubling).
// kDirect and kRecursiveDoubling take them at every size.
bool UseDirect(const CollectiveOptions& options, const Group& group,
               size_t bytes);

// How long one transfer is waited for: options.timeout, with a warning
// after options.stall_warning.
transport::WaitLimits LimitsOf(const CollectiveOptions& options);

// Waits for `request` from now on within `limits` (transport/stall_wait.h).
absl::Status Wait(transport::Request& request,
                  const transport::WaitLimits& limits);

// Waits for every non-null request in order, each with its own deadline;
// returns the first error.
absl::Status WaitAll(const std::vector<RequestPtr>& requests,
                     const transport::WaitLimits& limits);

// Posts a receive from every other member j of `group`, nearest predecessor
// first (j = index - 1, index - 2, ...), of blocks[j].bytes into
// output + blocks[j].offset, and appends the requests to *requests. An
// empty block gets no receive.
void PostRecvsFromOthers(transport::Context& context, const Group& group,
                         char* output, const std::vector<Span>& blocks,
                         std::vector<RequestPtr>* requests);

// True if every non-null request has completed.
bool AllDone(const std::vector<RequestPtr>& requests);

// `status` with its code kept and its message prefixed by who failed:
// "<collective> on rank R (member i of N): <transport message>".
absl::Status Annotate(const absl::Status& status, absl::string_view collective,
                      const transport::Context& context, const Group& group);

// Scratch memory that posted receives write into (and sends may read from).
// If a collective returns early with requests still posted on it, the
// transport could touch it after it was freed (until the runtime aborts the
// context); AbandonIfPending() then keeps it for good instead. Large
// scratch (>= 4 MiB) is on transparent huge pages, and the last one a thread
// frees is kept for its next collective of that size.
class Scratch {
 public:
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  char* data() { return data_; }
  // Gives up the buffer unless every request in `pending` is done: it is
  // then never freed (kept in a process-wide quarantine).
  void AbandonIfPending(const std::vector<RequestPtr>& pending);

 private:
  char* data_;
  size_t bytes_;
};

// The algorithms behind the public entry points, which check arguments,
// handle the trivial cases (one member, nothing to move) and annotate errors.
absl::Status AllreduceRing(transport::Context& context, const Group& group,
                           void* data, size_t count, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options);
// Out of place with `source` (see RunRingPlan): no copy of the input first.
absl::Status AllreduceRing(transport::Context& context, const Group& group,
                           const DataView& data, size_t count, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options,
                           const DataView* source = nullptr);
absl::Status AllreduceDirect(transport::Context& context, const Group& group,
                             void* data, size_t count, DataType dtype,
                             ReduceOp op, const CollectiveOptions& options);
// The direct algorithm of a pair whose transport reduces on receive
// (PairReducesOnReceive), out of place: each member combines the peer's
// buffer with its `input` where it lies in the transport's memory, member
// 0's operand first, straight into `output` (which overlaps neither): no
// copy of the input into the output first, none out of the transport.
// Bit for bit AllreduceDirect's result. (In place, reducing out of the
// transport into scratch and copying back was faster in some runs and
// slower in others: combining out of the peer's memory pays where it
// saves a whole copy.)
bool PairReducesOnReceive(transport::Context& context, const Group& group);
absl::Status AllreducePairOnReceive(transport::Context& context,
                                    const Group& group, const void* input,
                                    void* output, size_t count, DataType dtype,
                                    ReduceOp op,
                                    const CollectiveOptions& options);

absl::Status AllreduceHierarchical(transport::Context& context,
                                   const Group& group, const DataView& data,
                                   size_t count, DataType dtype, ReduceOp op,
                                   const CollectiveOptions& options);
absl::Status AllreduceDoubling(transport::Context& context, const Group& group,
                               void* data, size_t count, DataType dtype,
                               ReduceOp op, const CollectiveOptions& options);

// Groups of more members than this take the log N small-message
// algorithms under kAuto: a direct round's N - 1 peers and (N - 1)-fold
// traffic per member grow with the job, log2 N rounds slowly.
inline constexpr int kDirectMaxMembers = 64;
// Whether a small collective over `group` takes its log N algorithm
// (recursive doubling; for Broadcast a binomial tree) rather than the direct
// round: options.algorithm, else the group's size.
bool UseDoubling(const CollectiveOptions& options, const Group& group);
// A small allreduce, direct or by recursive doubling (UseDoubling), over a
// view: pieces are gathered into one buffer first (small totals, so the
// copy is cheap).
absl::Status AllreduceSmall(transport::Context& context, const Group& group,
                            const DataView& data, size_t count, DataType dtype,
                            ReduceOp op, const CollectiveOptions& options);

// How `group` lies on hosts (from options.hosts): this member's host mates
// (`local`, this one included, in group order) and the members in its
// position on every host (`cross`, in order of each host's first member).
// `balanced` when every host holds the same number of members; `known` when
// options.hosts covers the group. `members`: every host's members (context
// ranks), hosts in the order of `cross`, each in group order.
struct HostLayout {
  bool known = false;
  bool balanced = false;
  int num_hosts = 0;
  Group local;
  Group cross;
  std::vector<std::vector<int>> members;
};
HostLayout LayoutOnHosts(const Group& group, const std::vector<int>& hosts);

// The context rank of the member `offset` places after this one in the ring.
inline int RingPeer(const Group& group, int offset) {
  return group.ranks[Mod(group.index + offset, group.size())];
}

}  // namespace hvd::collectives::internal

#endif  // HVD_CORE_COLLECTIVES_INTERNAL_H_
