#include "launcher/hosts.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hvd {
namespace launcher {
namespace {

bool ValidHostName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (absl::ascii_isspace(c) || c == ',' || c == ':' || c == '=' ||
        c == '#' || c == '\'' || c == '"' || c == ';' || c == '$' ||
        c == '`' || c == '\\') {
      return false;
    }
  }
  return name[0] != '-';  // would read as an ssh option
}

absl::Status CheckUnique(const std::vector<HostSlots>& hosts,
                         absl::string_view where) {
  std::set<std::string> seen;
  for (const HostSlots& h : hosts) {
    if (!seen.insert(h.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": host '", h.name, "' is listed twice"));
    }
  }
  return absl::OkStatus();
}

// "host" or "host:N".
absl::StatusOr<HostSlots> ParseHostColonSlots(absl::string_view entry,
                                             absl::string_view where) {
  HostSlots h;
  size_t colon = entry.rfind(':');
  absl::string_view name = entry;
  if (colon != absl::string_view::npos) {
    name = entry.substr(0, colon);
    absl::string_view n = entry.substr(colon + 1);
    if (!absl::SimpleAtoi(n, &h.slots) || h.slots <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": bad slot count in '", entry,
                       "' (want host:N with N a positive integer)"));
    }
  }
  if (!ValidHostName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": bad host name in '", entry, "'"));
  }
  h.name = std::string(name);
  return h;
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseHostList(absl::string_view list) {
  std::vector<HostSlots> hosts;
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError("-H: empty host list");
  }
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    absl::StatusOr<HostSlots> h = ParseHostColonSlots(entry, "-H");
    if (!h.ok()) return h.status();
    hosts.push_back(*std::move(h));
  }
  absl::Status s = CheckUnique(hosts, "-H");
  if (!s.ok()) return s;
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ParseHostfile(
    absl::string_view contents, absl::string_view filename) {
  std::vector<HostSlots> hosts;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_no;
    size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::string where = absl::StrCat(filename, ":", line_no);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() == 1) {
      absl::StatusOr<HostSlots> h = ParseHostColonSlots(fields[0], where);
      if (!h.ok()) return h.status();
      hosts.push_back(*std::move(h));
      continue;
    }
    HostSlots h;
    absl::string_view value;
    if (fields.size() != 2 || !absl::ConsumePrefix(&fields[1], "slots=") ||
        !ValidHostName(fields[0])) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": expected 'host slots=N' or 'host:N', got '", line, "'"));
    }
    value = fields[1];
    if (!absl::SimpleAtoi(value, &h.slots) || h.slots <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": bad slot count '", value, "' (want a positive integer)"));
    }
    h.name = std::string(fields[0]);
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ": no hosts in hostfile"));
  }
  absl::Status s = CheckUnique(hosts, filename);
  if (!s.ok()) return s;
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ReadHostfile(
    const std::string& filename) {
  std::ifstream in(filename);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read hostfile '", filename, "'"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read hostfile '", filename, "'"));
  }
  return ParseHostfile(buffer.str(), filename);
}

absl::StatusOr<std::vector<HostAssignment>> AssignRanks(
    const std::vector<HostSlots>& hosts, int np) {
  if (np <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("-np must be positive, got ", np));
  }
  int total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  if (np > total) {
    return absl::InvalidArgumentError(
        absl::StrCat("-np ", np, " is more than the ", total,
                     " slots of the hosts given"));
  }
  std::vector<HostAssignment> out;
  int rank = 0;
  for (const HostSlots& h : hosts) {
    if (rank == np) break;
    HostAssignment a;
    a.name = h.name;
    for (int s = 0; s < h.slots && rank < np; ++s) {
      WorkerSlot w;
      w.rank = rank++;
      w.local_rank = s;
      a.workers.push_back(w);
    }
    out.push_back(std::move(a));
  }
  // local_size per host; cross_rank/size per local_rank across hosts.
  std::vector<int> hosts_with_local_rank;
  for (HostAssignment& a : out) {
    for (WorkerSlot& w : a.workers) {
      w.local_size = static_cast<int>(a.workers.size());
      if (static_cast<int>(hosts_with_local_rank.size()) <= w.local_rank) {
        hosts_with_local_rank.resize(w.local_rank + 1, 0);
      }
      w.cross_rank = hosts_with_local_rank[w.local_rank]++;
    }
  }
  for (HostAssignment& a : out) {
    for (WorkerSlot& w : a.workers) {
      w.cross_size = hosts_with_local_rank[w.local_rank];
    }
  }
  return out;
}

}  // namespace launcher
}  // namespace hvd
