// Chrome-trace (chrome://tracing, Perfetto) timeline of tensor activity,
// written by rank 0: one row per tensor; a NEGOTIATE_<OP> span from the first
// rank's request to readiness (with an instant mark per rank that submitted),
// then activity spans (QUEUE, MEMCPY_IN_FUSION_BUFFER, <OP>,
// MEMCPY_OUT_FUSION_BUFFER).
#ifndef HVD_CORE_RUNTIME_TIMELINE_H_
#define HVD_CORE_RUNTIME_TIMELINE_H_

#include <atomic>
#include <cstdio>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hvd::runtime {

// Thread-safe. Calls while not started are no-ops (and take no lock).
class Timeline {
 public:
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  absl::Status Start(const std::string& path, bool mark_cycles);
  // Closes the JSON array and the file.
  void Stop();
  bool active() const;

  void NegotiateStart(absl::string_view tensor, absl::string_view op);
  void NegotiateRankReady(absl::string_view tensor, int rank);
  void NegotiateEnd(absl::string_view tensor);
  void ActivityStart(absl::string_view tensor, absl::string_view activity);
  void ActivityEnd(absl::string_view tensor);
  void MarkCycle();

 private:
  int RowLocked(absl::string_view tensor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteLocked(absl::string_view name, char phase, int row,
                   absl::string_view args) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool mark_cycles_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time start_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int, std::less<>> rows_ ABSL_GUARDED_BY(mu_);
  // Whether file_ is open, read without mu_: a call while the timeline is
  // off (the usual case, several a call) takes no lock.
  std::atomic<bool> writing_{false};
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_TIMELINE_H_
