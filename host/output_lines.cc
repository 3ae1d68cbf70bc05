#include "host/output_lines.h"

#include <utility>

namespace hvd {
namespace host {

std::string LineSplitter::Add(absl::string_view data) {
  std::string out;
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == absl::string_view::npos) {
      size_t room = kMaxLine - partial_.size();
      if (data.size() < room) {
        partial_.append(data.data(), data.size());
        break;
      }
      partial_.append(data.data(), room);
      data.remove_prefix(room);
      out += partial_;
      out += '\n';
      partial_.clear();
      continue;
    }
    out += partial_;
    partial_.clear();
    out.append(data.data(), nl + 1);
    data.remove_prefix(nl + 1);
  }
  return out;
}

std::string LineSplitter::Flush() {
  if (partial_.empty()) return "";
  std::string out = std::move(partial_);
  partial_.clear();
  out += '\n';
  return out;
}

}  // namespace host
}  // namespace hvd
