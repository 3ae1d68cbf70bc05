// Fuzzes hvdrun's parsers of what the user types or points it at: the -H
// host list and hostfile text, and the rank assignment over what they
// accept; and Slurm's compressed host lists and counts per node. Each must
// refuse bad input with an error, never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/common/slurm_lists.h"
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
  auto names = hvd::ExpandSlurmHostList(text);
  if (names.ok()) {
    for (const std::string& n : *names) {
      if (n.empty()) __builtin_trap();
    }
  }
  auto counts = hvd::ExpandSlurmCounts(text, "fuzz");
  if (counts.ok()) {
    for (int c : *counts) {
      if (c <= 0) __builtin_trap();
    }
  }
  return 0;
}
