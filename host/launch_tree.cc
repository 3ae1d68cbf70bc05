#include "host/launch_tree.h"

#include <set>

namespace hvd {
namespace host {

std::vector<int> LaunchParents(const std::vector<bool>& from_launcher,
                               int fanout) {
  std::vector<int> parents(from_launcher.size(), -1);
  std::vector<int> remote;  // the tree's nodes, in host order
  for (size_t h = 0; h < from_launcher.size(); ++h) {
    if (!from_launcher[h]) remote.push_back(static_cast<int>(h));
  }
  // Node i of the tree (0-based, hvdrun above node 0) has node i / fanout
  // - 1 as its parent: nodes 0..fanout-1 are hvdrun's.
  for (size_t i = 0; i < remote.size(); ++i) {
    const int parent = static_cast<int>(i) / fanout - 1;
    if (parent >= 0) parents[remote[i]] = remote[parent];
  }
  return parents;
}

std::vector<Bootstrap::Below> Subtree(const std::vector<Bootstrap::Below>& tree,
                                      int root) {
  std::set<int> inside = {root};
  std::vector<Bootstrap::Below> out;
  for (const Bootstrap::Below& h : tree) {
    if (inside.count(h.parent) == 0) continue;
    inside.insert(h.index);
    out.push_back(h);
  }
  return out;
}

}  // namespace host
}  // namespace hvd
