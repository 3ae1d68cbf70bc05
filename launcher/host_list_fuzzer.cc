// Fuzzes hvdrun's parsers of what the user types or points it at: the -H
// host list and hostfile text, and the rank assignment over what they
// accept. Each must refuse bad input with an error, never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "launcher/hosts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const int np = size > 0 ? data[0] % 64 : 1;
  for (auto hosts : {hvd::launcher::ParseHostList(text),
                     hvd::launcher::ParseHostfile(text, "fuzz-hostfile")}) {
    if (!hosts.ok()) continue;
    for (const hvd::launcher::HostSlots& h : *hosts) {
      if (h.name.empty() || h.slots <= 0) __builtin_trap();
    }
    hvd::launcher::AssignRanks(*hosts, np).IgnoreError();
  }
  return 0;
}
