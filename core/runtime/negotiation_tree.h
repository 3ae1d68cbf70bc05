// The tree negotiation travels: every rank's request list goes up to rank 0
// through its parent, and rank 0's answer comes back down the same way.
// With at most `fanout` + 1 ranks the tree is flat (rank 0 the parent of
// all); larger jobs form a `fanout`-ary tree (rank r's parent is
// (r - 1) / fanout), so that no rank holds more than `fanout` connections
// for negotiation or handles more than `fanout` + 1 messages a cycle, and a
// list reaches rank 0 in log_fanout N hops.
//
// What goes up is a bundle: the lists of a rank's whole subtree, each
// framed as rank (u32) | length (u32) | bytes, little-endian. A rank appends
// its children's bundles to its own without reading them; rank 0 splits
// them. Pure functions, thread-compatible.
#ifndef HVD_CORE_RUNTIME_NEGOTIATION_TREE_H_
#define HVD_CORE_RUNTIME_NEGOTIATION_TREE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hvd::runtime {

// Rank r's parent in a job of `size` (-1 for rank 0), and its children in
// ascending order. `fanout` >= 1.
int NegotiationParent(int rank, int fanout);
std::vector<int> NegotiationChildren(int rank, int size, int fanout);

// Appends `list` framed as rank `rank`'s to `bundle`.
void AppendToBundle(int rank, absl::string_view list, std::string* bundle);

// Splits `bundle` (as received from child `from`) into `lists` (by rank).
// DataLoss naming `from` when a frame is cut short, names a rank outside
// the job or one already filled.
absl::Status SplitBundle(absl::string_view bundle, int from,
                         std::vector<std::string>* lists,
                         std::vector<bool>* filled);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_NEGOTIATION_TREE_H_
