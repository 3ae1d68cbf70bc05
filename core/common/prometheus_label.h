// Label values in Prometheus' text exposition format: what the workers'
// metrics reports write and what hvdrun's /metrics and page read back.
#ifndef HVD_CORE_COMMON_PROMETHEUS_LABEL_H_
#define HVD_CORE_COMMON_PROMETHEUS_LABEL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace hvd {

// `v` as it goes between a label's quotes: backslash, double quote and
// newline escaped as \\, \" and \n.
std::string EscapeLabelValue(absl::string_view v);

// The inverse, of an escaped value up to (not including) its closing quote,
// which it stops at.
std::string UnescapeLabelValue(absl::string_view escaped);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_PROMETHEUS_LABEL_H_
