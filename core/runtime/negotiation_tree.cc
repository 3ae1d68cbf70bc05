#include "core/runtime/negotiation_tree.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/common/little_endian.h"

namespace hvd::runtime {
namespace {

constexpr size_t kFrameHeader = 8;  // the rank, then the list's length

}  // namespace

int NegotiationParent(int rank, int fanout) {
  return rank == 0 ? -1 : (rank - 1) / fanout;
}

std::vector<int> NegotiationChildren(int rank, int size, int fanout) {
  std::vector<int> children;
  const int64_t first = int64_t{rank} * fanout + 1;
  for (int64_t c = first; c < first + fanout && c < size; ++c) {
    children.push_back(static_cast<int>(c));
  }
  return children;
}

void AppendToBundle(int rank, absl::string_view list, std::string* bundle) {
  char header[kFrameHeader];
  StoreLE32(static_cast<uint32_t>(rank), header);
  StoreLE32(static_cast<uint32_t>(list.size()), header + 4);
  bundle->append(header, kFrameHeader);
  bundle->append(list.data(), list.size());
}

absl::Status SplitBundle(absl::string_view bundle, int from,
                         std::vector<std::string>* lists,
                         std::vector<bool>* filled) {
  auto malformed = [from](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(
        "malformed negotiation message from rank ", from, ": ", why));
  };
  while (!bundle.empty()) {
    if (bundle.size() < kFrameHeader) return malformed("a frame is cut short");
    const uint32_t rank = LoadLE32(bundle.data());
    const uint32_t len = LoadLE32(bundle.data() + 4);
    bundle.remove_prefix(kFrameHeader);
    if (len > bundle.size()) return malformed("a frame is cut short");
    if (rank >= lists->size()) {
      return malformed(
          absl::StrCat("it names rank ", rank, " of a job of ", lists->size()));
    }
    if ((*filled)[rank]) {
      return malformed(absl::StrCat("rank ", rank, "'s list came twice"));
    }
    (*lists)[rank].assign(bundle.data(), len);
    (*filled)[rank] = true;
    bundle.remove_prefix(len);
  }
  return absl::OkStatus();
}

}  // namespace hvd::runtime
