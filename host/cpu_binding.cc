#include "host/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace hvd {
namespace host {
namespace {

// The integer in file `path`, or `fallback` if it cannot be read.
int ReadInt(const std::string& path, int fallback) {
  std::ifstream in(path);
  std::string text;
  int value;
  if (!std::getline(in, text) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) {
    return fallback;
  }
  return value;
}

}  // namespace

std::vector<CpuCore> CoresOf(const std::vector<int>& allowed,
                             const std::string& sysfs) {
  // (package, core id, first CPU for a CPU without topology) -> its CPUs.
  std::map<std::tuple<int, int, int>, std::vector<int>> by_core;
  for (int cpu : allowed) {
    const std::string topology = absl::StrCat(sysfs, "/cpu", cpu, "/topology/");
    const int package = ReadInt(topology + "physical_package_id", -1);
    const int core = ReadInt(topology + "core_id", -1);
    const bool known = package >= 0 && core >= 0;
    by_core[known ? std::make_tuple(package, core, -1)
                  : std::make_tuple(std::max(package, 0), cpu, cpu)]
        .push_back(cpu);
  }
  std::vector<CpuCore> cores;
  for (auto& [key, cpus] : by_core) {
    std::sort(cpus.begin(), cpus.end());
    cores.push_back({std::get<0>(key), std::get<1>(key), std::move(cpus)});
  }
  return cores;
}

std::vector<int> CpuShare(const std::vector<CpuCore>& cores, int local_rank,
                          int local_size) {
  const int n = static_cast<int>(cores.size());
  if (local_size <= 0 || local_rank < 0 || local_rank >= local_size ||
      n < local_size) {
    return {};
  }
  const int each = n / local_size;
  const int extra = n % local_size;  // the first `extra` get one more
  const int first = local_rank * each + std::min(local_rank, extra);
  const int count = each + (local_rank < extra ? 1 : 0);
  std::vector<int> cpus;
  for (int c = first; c < first + count; ++c) {
    cpus.insert(cpus.end(), cores[c].cpus.begin(), cores[c].cpus.end());
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

absl::StatusOr<cpu_set_t> CpuSetOf(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CPU ", cpu, " is out of range (0 to ", CPU_SETSIZE - 1, ")"));
    }
    CPU_SET(cpu, &set);
  }
  return set;
}

std::string CpuListString(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace host
}  // namespace hvd
