#include "core/collectives/options.h"

namespace hvd::collectives {

Group Group::All(const transport::Context& context) {
  Group group;
  group.ranks.resize(context.size());
  for (int r = 0; r < context.size(); ++r) group.ranks[r] = r;
  group.index = context.rank();
  return group;
}

}  // namespace hvd::collectives
