// hvdrun's flags, internal to //launcher:options: each flag's spellings, how
// many values it takes and what it does to Options. The parser (options.cc)
// and the config file (config_file.cc) both apply flags through this table,
// so a flag and its config-file key cannot drift apart.
#ifndef HVD_LAUNCHER_FLAG_TABLE_H_
#define HVD_LAUNCHER_FLAG_TABLE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {
namespace internal {

// Applies a flag with its values (as many as the flag's arity).
using Setter =
    std::function<absl::Status(Options&, const std::vector<std::string>&)>;

struct Flag {
  std::vector<std::string> names;  // as typed, with dashes; [0] in messages
  int arity = 0;                   // values taken: 0, 1 or 2
  Setter set;
  // Flags with the same `dest` set one thing (--x and --no-x): only one of
  // them may be given, and once, unless `repeatable`. Empty: names[0].
  std::string dest;
  bool repeatable = false;

  const std::string& Dest() const { return dest.empty() ? names[0] : dest; }
};

// Every flag, hvd's own and horovodrun 0.28's.
const std::vector<Flag>& Flags();

// The flag spelled `name` (with its dashes); null if there is none.
const Flag* FindFlag(absl::string_view name);

}  // namespace internal
}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_FLAG_TABLE_H_
