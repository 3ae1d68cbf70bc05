#include "core/common/slurm_lists.h"

#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hvd {
namespace {

// A bound on what a compressed list may expand to: far above any cluster,
// low enough that a malformed "n[0-999999999]" fails instead of filling
// memory.
constexpr size_t kMaxExpanded = 100000;

bool AllDigits(absl::string_view s) {
  if (s.empty() || s.size() > 9) return false;  // fits an int
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

absl::Status BadList(absl::string_view list, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad Slurm host list '", list, "': ", why));
}

// The contents of one bracket group, "01-04,07", appended to `out` as
// strings with the zero padding of each range's first bound.
absl::Status ExpandRanges(absl::string_view list, absl::string_view ranges,
                          std::vector<std::string>* out) {
  for (absl::string_view r : absl::StrSplit(ranges, ',')) {
    std::pair<absl::string_view, absl::string_view> lo_hi =
        absl::StrSplit(r, absl::MaxSplits('-', 1));
    absl::string_view lo = lo_hi.first;
    absl::string_view hi =
        r.find('-') == absl::string_view::npos ? lo_hi.first : lo_hi.second;
    int a = 0, b = 0;
    if (!AllDigits(lo) || !AllDigits(hi) || !absl::SimpleAtoi(lo, &a) ||
        !absl::SimpleAtoi(hi, &b)) {
      return BadList(list, absl::StrCat("'", r, "' is not N or N-M"));
    }
    if (b < a) {
      return BadList(list,
                     absl::StrCat("range '", r, "' ends below its start"));
    }
    if (out->size() + static_cast<size_t>(b - a) >= kMaxExpanded) {
      return BadList(list, absl::StrCat("more than ", kMaxExpanded, " names"));
    }
    for (int i = a; i <= b; ++i) {
      std::string n = absl::StrCat(i);
      if (n.size() < lo.size()) n.insert(0, lo.size() - n.size(), '0');
      out->push_back(std::move(n));
    }
  }
  return absl::OkStatus();
}

// One name of the list, "rack[1-2]-n[01-02]", expanded onto `out`.
absl::Status ExpandName(absl::string_view list, absl::string_view name,
                        std::vector<std::string>* out) {
  if (name.empty()) return BadList(list, "an empty name");
  std::vector<std::string> names = {""};
  while (!name.empty()) {
    const size_t open = name.find('[');
    const absl::string_view text = name.substr(0, open);
    if (text.find(']') != absl::string_view::npos) {
      return BadList(list, "']' without '['");
    }
    for (std::string& n : names) absl::StrAppend(&n, text);
    if (open == absl::string_view::npos) break;
    const size_t close = name.find(']', open);
    if (close == absl::string_view::npos)
      return BadList(list, "'[' without ']'");
    std::vector<std::string> suffixes;
    absl::Status s =
        ExpandRanges(list, name.substr(open + 1, close - open - 1), &suffixes);
    if (!s.ok()) return s;
    if (names.size() * suffixes.size() >= kMaxExpanded) {
      return BadList(list, absl::StrCat("more than ", kMaxExpanded, " names"));
    }
    std::vector<std::string> next;
    for (const std::string& n : names) {
      for (const std::string& x : suffixes) next.push_back(n + x);
    }
    names = std::move(next);
    name.remove_prefix(close + 1);
  }
  out->insert(out->end(), names.begin(), names.end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(
    absl::string_view list) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[' && ++depth > 1) return BadList(list, "nested '['");
    if (c == ']' && --depth < 0) return BadList(list, "']' without '['");
    if (c != ',' || depth > 0) continue;
    absl::Status s = ExpandName(list, list.substr(start, i - start), &out);
    if (!s.ok()) return s;
    start = i + 1;
  }
  if (depth != 0) return BadList(list, "'[' without ']'");
  std::set<std::string> seen;
  for (const std::string& n : out) {
    if (!seen.insert(n).second) {
      return BadList(list, absl::StrCat("'", n, "' is listed twice"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<int>> ExpandSlurmCounts(absl::string_view counts,
                                                   absl::string_view variable) {
  std::vector<int> out;
  for (absl::string_view entry : absl::StrSplit(counts, ',')) {
    absl::string_view n = entry;
    int count = 0, times = 1;
    const size_t paren = entry.find('(');
    if (paren != absl::string_view::npos) {
      n = entry.substr(0, paren);
      absl::string_view rep = entry.substr(paren);
      if (!absl::ConsumePrefix(&rep, "(x") || !absl::ConsumeSuffix(&rep, ")") ||
          !AllDigits(rep) || !absl::SimpleAtoi(rep, &times) || times <= 0) {
        times = 0;
      }
    }
    if (!AllDigits(n) || !absl::SimpleAtoi(n, &count) || count <= 0 ||
        times <= 0 || out.size() + times > kMaxExpanded) {
      return absl::InvalidArgumentError(
          absl::StrCat(variable, ": bad entry '", entry, "' in '", counts,
                       "' (want N or N(xM), N and M positive)"));
    }
    out.insert(out.end(), static_cast<size_t>(times), count);
  }
  return out;
}

}  // namespace hvd
