// The launch tree: which agent starts which. hvdrun starts the agents of
// the first `fanout` remote hosts itself; each of those starts the agents
// of up to `fanout` more, and so on, so that no one process makes more
// than `fanout` ssh handshakes, and a job on H hosts starts in about
// log_fanout(H) rounds of them.
#ifndef HVD_HOST_LAUNCH_TREE_H_
#define HVD_HOST_LAUNCH_TREE_H_

#include <vector>

#include "host/bootstrap.h"

namespace hvd {
namespace host {

// Per host, the index of the host whose agent starts its agent; -1: hvdrun
// itself. The hosts with `from_launcher` set (this machine's, started by
// fork/exec) are hvdrun's; the others form a `fanout`-ary tree in host
// order, breadth first, hvdrun at its root: with fanout 2 and remote hosts
// 0-5, hvdrun starts 0 and 1, host 0 starts 2 and 3, host 1 starts 4 and
// 5. A parent always comes before its children. fanout >= 1.
std::vector<int> LaunchParents(const std::vector<bool>& from_launcher,
                               int fanout);

// The hosts below `root` in `tree` (each with its parent; parents before
// their children, as LaunchParents orders them), in the order given.
std::vector<Bootstrap::Below> Subtree(const std::vector<Bootstrap::Below>& tree,
                                      int root);

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_LAUNCH_TREE_H_
