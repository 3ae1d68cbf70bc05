#include "core/common/prometheus_label.h"

#include "absl/strings/str_replace.h"

namespace hvd {

std::string EscapeLabelValue(absl::string_view v) {
  return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

std::string UnescapeLabelValue(absl::string_view escaped) {
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '"') break;
    if (escaped[i] == '\\' && i + 1 < escaped.size()) {
      ++i;
      out.push_back(escaped[i] == 'n' ? '\n' : escaped[i]);
      continue;
    }
    out.push_back(escaped[i]);
  }
  return out;
}

}  // namespace hvd
