// Worker output as the agent hands it on: which stream, cut into whole lines.
#ifndef HVD_HOST_OUTPUT_LINES_H_
#define HVD_HOST_OUTPUT_LINES_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace hvd {
namespace host {

// Accumulates a byte stream and hands out whole lines. Not thread-safe.
class LineSplitter {
 public:
  // A line longer than this is cut (a newline is inserted), so a program that
  // never ends its line cannot grow the buffer without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  // Adds `data`; returns the complete lines now available (each ending in
  // '\n'), possibly empty.
  std::string Add(absl::string_view data);
  // The unterminated rest with '\n' added; empty if there is none.
  std::string Flush();

 private:
  std::string partial_;
};

enum class OutputStream { kStdout = 0, kStderr = 1 };

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_OUTPUT_LINES_H_
