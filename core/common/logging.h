// Minimal leveled logging to stderr:
// "[2026-11-25 06:10:00.123456: hvd rank 3 WARNING] message", local time
// first as Horovod's lines have it.
//
// Why not glog: libhvd.so is loaded into framework processes (torch ships its
// own glog build) and glog's process-global flags and init would collide.
// The level is warning until SetLogLevel (hvd_init applies HVD_LOG_LEVEL:
// trace, debug, info, warning, error, fatal). Thread-safe: one write(2) per line.
#ifndef HVD_CORE_COMMON_LOGGING_H_
#define HVD_CORE_COMMON_LOGGING_H_

#include <sstream>
#include "absl/strings/string_view.h"

namespace hvd {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarning, kError, kFatal };

// Parses a level name; false if it is not one.
bool ParseLogLevel(absl::string_view text, LogLevel* level);
LogLevel CurrentLogLevel();
void SetLogLevel(LogLevel level);
// The rank printed in each line; -1 (the default) prints none.
void SetLogRank(int rank);
// Whether lines start with the time (the default; hvd_init applies
// HVD_LOG_HIDE_TIME).
void SetLogTime(bool show);

// Names for HVD_LOG(INFO) and the like.
namespace log_severity {
inline constexpr LogLevel TRACE = LogLevel::kTrace;
inline constexpr LogLevel DEBUG = LogLevel::kDebug;
inline constexpr LogLevel INFO = LogLevel::kInfo;
inline constexpr LogLevel WARNING = LogLevel::kWarning;
inline constexpr LogLevel ERROR = LogLevel::kError;
inline constexpr LogLevel FATAL = LogLevel::kFatal;
}  // namespace log_severity

namespace internal {

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace internal
}  // namespace hvd

// HVD_LOG(WARNING) << "text";
#define HVD_LOG(level)                                                \
  if (::hvd::log_severity::level < ::hvd::CurrentLogLevel()) {        \
  } else                                                              \
    ::hvd::internal::LogMessage(::hvd::log_severity::level, __FILE__, \
                                __LINE__)                             \
        .stream()

#endif  // HVD_CORE_COMMON_LOGGING_H_
