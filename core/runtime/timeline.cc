#include "core/runtime/timeline.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hvd::runtime {
namespace {

// JSON string escaping for tensor names.
std::string Quote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrCat("\\u00", c < 0x10 ? "0" : "",
                          absl::Hex(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Timeline::~Timeline() { Stop(); }

absl::Status Timeline::Start(const std::string& path, bool mark_cycles) {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) return absl::OkStatus();
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write timeline '", path, "': ", std::strerror(errno)));
  }
  std::fputs("[\n", file_);
  start_ = absl::Now();
  mark_cycles_ = mark_cycles;
  rows_.clear();
  writing_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void Timeline::Stop() {
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  // Chrome's parser accepts a trailing comma only loosely: end with an
  // innocuous metadata event so the array is strict JSON.
  std::fputs("{\"name\": \"trace_end\", \"ph\": \"M\", \"pid\": 0}\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
  writing_.store(false, std::memory_order_release);
}

bool Timeline::active() const {
  return writing_.load(std::memory_order_acquire);
}

int Timeline::RowLocked(absl::string_view tensor) {
  auto it = rows_.find(tensor);
  if (it != rows_.end()) return it->second;
  const int row = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(std::string(tensor), row);
  std::fprintf(file_,
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"args\": {\"name\": %s}},\n",
               row, Quote(tensor).c_str());
  std::fprintf(file_,
               "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, "
               "\"args\": {\"sort_index\": %d}},\n",
               row, row);
  return row;
}

void Timeline::WriteLocked(absl::string_view name, char phase, int row,
                           absl::string_view args) {
  const int64_t ts = absl::ToInt64Microseconds(absl::Now() - start_);
  std::string line = absl::StrCat("{\"name\": ", Quote(name), ", \"ph\": \"",
                                  std::string(1, phase), "\", \"ts\": ", ts,
                                  ", \"pid\": ", row, ", \"tid\": 1");
  if (phase == 'i') absl::StrAppend(&line, ", \"s\": \"p\"");
  if (!args.empty()) absl::StrAppend(&line, ", \"args\": ", args);
  absl::StrAppend(&line, "},\n");
  std::fputs(line.c_str(), file_);
}

void Timeline::NegotiateStart(absl::string_view tensor, absl::string_view op) {
  if (!writing_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  WriteLocked(absl::StrCat("NEGOTIATE_", op), 'B', RowLocked(tensor), "");
}

void Timeline::NegotiateRankReady(absl::string_view tensor, int rank) {
  if (!writing_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  WriteLocked(absl::StrCat(rank), 'i', RowLocked(tensor), "");
}

void Timeline::NegotiateEnd(absl::string_view tensor) {
  if (!writing_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  WriteLocked("", 'E', RowLocked(tensor), "");
}

void Timeline::ActivityStart(absl::string_view tensor,
                             absl::string_view activity) {
  if (!writing_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  WriteLocked(activity, 'B', RowLocked(tensor), "");
}

void Timeline::ActivityEnd(absl::string_view tensor) {
  if (!writing_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  WriteLocked("", 'E', RowLocked(tensor), "");
}

void Timeline::MarkCycle() {
  if (!writing_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr || !mark_cycles_) return;
  WriteLocked("CYCLE_START", 'i', 0, "");
}

}  // namespace hvd::runtime
