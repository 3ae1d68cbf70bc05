// Where an error happened, put before what it was: the core's errors read
// "rank 3: reading the TCP addresses of the lower ranks from the store: key
// ... not set within 30s".
#ifndef HVD_CORE_COMMON_ANNOTATE_H_
#define HVD_CORE_COMMON_ANNOTATE_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hvd {

// `status` with its code, its message prefixed by `where` and ": ".
inline absl::Status Annotate(const absl::Status& status,
                             absl::string_view where) {
  return absl::Status(status.code(),
                      absl::StrCat(where, ": ", status.message()));
}

}  // namespace hvd

#endif  // HVD_CORE_COMMON_ANNOTATE_H_
