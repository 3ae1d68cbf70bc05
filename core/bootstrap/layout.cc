#include "core/bootstrap/layout.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/common/annotate.h"

namespace hvd::bootstrap {
namespace {

// The published layout: "ok <all_rdma 0|1> <group>,<group>,..." or "error
// <message>". A group "<first>-<last>x<count>" stands for hosts first to
// last (indices in order of appearance) in turn, each holding the next
// `count` ranks: a job placed host by host, every host with the same number
// of ranks, is one group whatever its size, and every rank reads a few
// bytes, not a host index per rank.
constexpr absl::string_view kOk = "ok";
constexpr absl::string_view kError = "error";

// The groups of `hosts`, each as (first, last, count).
struct Group {
  int first, last, count;
};

std::vector<Group> GroupsOf(const std::vector<int>& hosts) {
  std::vector<Group> groups;
  size_t r = 0;
  while (r < hosts.size()) {
    const int host = hosts[r];
    int count = 0;
    while (r < hosts.size() && hosts[r] == host) ++r, ++count;
    if (!groups.empty() && groups.back().last + 1 == host &&
        groups.back().count == count) {
      groups.back().last = host;
    } else {
      groups.push_back({host, host, count});
    }
  }
  return groups;
}

// Appends group `text`'s ranks' hosts to `hosts`; false when it is
// unreadable or would take `hosts` past `size` ranks.
bool AppendGroup(absl::string_view text, int size, std::vector<int>& hosts) {
  const std::pair<absl::string_view, absl::string_view> range_count =
      absl::StrSplit(text, absl::MaxSplits('x', 1));
  const std::pair<absl::string_view, absl::string_view> range =
      absl::StrSplit(range_count.first, absl::MaxSplits('-', 1));
  int first = -1, last = -1, count = 0;
  if (!absl::SimpleAtoi(range.first, &first) ||
      !absl::SimpleAtoi(range.second, &last) ||
      !absl::SimpleAtoi(range_count.second, &count) || first < 0 ||
      last < first || last >= size || count < 1 ||
      static_cast<int64_t>(last - first + 1) * count >
          size - static_cast<int64_t>(hosts.size())) {
    return false;
  }
  for (int host = first; host <= last; ++host) {
    hosts.insert(hosts.end(), count, host);
  }
  return true;
}

std::string EncodeRecord(const LayoutRecord& record) {
  return absl::StrCat(record.rdma ? "rdma" : "tcp", "\n", record.host);
}

// Every rank's record, read by rank 0, into the layout.
absl::StatusOr<Layout> Gather(const std::vector<std::string>& records) {
  Layout layout;
  layout.hosts.resize(records.size());
  layout.all_rdma = true;
  // Host name to index, numbered in order of appearance.
  absl::flat_hash_map<absl::string_view, int> index_of;
  for (size_t r = 0; r < records.size(); ++r) {
    const std::vector<absl::string_view> fields =
        absl::StrSplit(records[r], absl::MaxSplits('\n', 1));
    if (fields.size() != 2 || (fields[0] != "rdma" && fields[0] != "tcp")) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, "'s layout record is unreadable"));
    }
    layout.all_rdma = layout.all_rdma && fields[0] == "rdma";
    const int next = static_cast<int>(index_of.size());
    layout.hosts[r] = index_of.try_emplace(fields[1], next).first->second;
  }
  return layout;
}

std::string EncodeLayout(const absl::StatusOr<Layout>& layout) {
  if (!layout.ok()) return absl::StrCat(kError, " ", layout.status().message());
  return absl::StrCat(
      kOk, " ", layout->all_rdma ? 1 : 0, " ",
      absl::StrJoin(GroupsOf(layout->hosts), ",",
                    [](std::string* out, const Group& g) {
                      absl::StrAppend(out, g.first, "-", g.last, "x", g.count);
                    }));
}

absl::StatusOr<Layout> DecodeLayout(absl::string_view value, int size) {
  const std::pair<absl::string_view, absl::string_view> tagged =
      absl::StrSplit(value, absl::MaxSplits(' ', 1));
  if (tagged.first == kError) return absl::InvalidArgumentError(tagged.second);
  const std::pair<absl::string_view, absl::string_view> fields =
      absl::StrSplit(tagged.second, absl::MaxSplits(' ', 1));
  Layout layout;
  if (tagged.first == kOk && (fields.first == "0" || fields.first == "1")) {
    layout.all_rdma = fields.first == "1";
    for (absl::string_view group : absl::StrSplit(fields.second, ',')) {
      if (!AppendGroup(group, size, layout.hosts)) break;
    }
  }
  if (static_cast<int>(layout.hosts.size()) != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the layout rank 0 published is unreadable for ", size, " ranks"));
  }
  return layout;
}

}  // namespace

absl::StatusOr<Layout> ExchangeLayout(int rank, int size,
                                      const LayoutRecord& mine, Store& store,
                                      absl::Duration timeout) {
  const std::string who = absl::StrCat("rank ", rank);
  absl::StatusOr<std::string> value = GatherThroughRoot(
      store, "layout/", rank, size, EncodeRecord(mine),
      "every rank's host and transport",
      [](const std::vector<std::string>& records) {
        return EncodeLayout(Gather(records));
      },
      timeout);
  if (!value.ok()) return Annotate(value.status(), who);
  absl::StatusOr<Layout> layout = DecodeLayout(*value, size);
  if (!layout.ok()) return Annotate(layout.status(), who);
  return layout;
}

}  // namespace hvd::bootstrap
