#include "core/common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hvd {
namespace {

std::atomic<int>& LevelStore() {
  static std::atomic<int> level{static_cast<int>(LogLevel::kWarning)};
  return level;
}

std::atomic<int> log_rank{-1};
std::atomic<bool> log_time{true};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kFatal: return "FATAL";
  }
  return "?";
}

}  // namespace

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  const std::string t = absl::AsciiStrToLower(text);
  static constexpr std::pair<const char*, LogLevel> kNames[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug},
      {"info", LogLevel::kInfo},   {"warning", LogLevel::kWarning},
      {"warn", LogLevel::kWarning}, {"error", LogLevel::kError},
      {"fatal", LogLevel::kFatal}};
  for (const auto& [name, value] : kNames) {
    if (t == name) {
      *level = value;
      return true;
    }
  }
  return false;
}

LogLevel CurrentLogLevel() { return static_cast<LogLevel>(LevelStore().load()); }

void SetLogLevel(LogLevel level) { LevelStore().store(static_cast<int>(level)); }

void SetLogRank(int rank) { log_rank.store(rank); }

void SetLogTime(bool show) { log_time.store(show); }

namespace internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level) {
  stream_ << "[";
  if (log_time.load()) {
    stream_ << absl::FormatTime("%Y-%m-%d %H:%M:%E6S: ", absl::Now(),
                                absl::LocalTimeZone());
  }
  stream_ << "hvd";
  if (const int rank = log_rank.load(); rank >= 0) stream_ << " rank " << rank;
  stream_ << " " << LevelName(level) << "] ";
  if (level_ <= LogLevel::kDebug) {
    absl::string_view f(file);
    stream_ << f.substr(f.rfind('/') + 1) << ":" << line << " ";
  }
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  (void)!::write(STDERR_FILENO, text.data(), text.size());
  if (level_ == LogLevel::kFatal) std::abort();
}

}  // namespace internal
}  // namespace hvd
