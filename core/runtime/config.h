// The runtime's configuration, read once at init from HVD_* / HOROVOD_*.
#ifndef HVD_CORE_RUNTIME_CONFIG_H_
#define HVD_CORE_RUNTIME_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hvd::runtime {

struct Config {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string hostname;
  std::string rendezvous_addr;  // empty: no rendezvous (size must be 1)
  std::string token;            // secret: never logged
  std::string iface;            // data-plane interface or address; empty: all

  absl::Duration cycle_time = absl::Milliseconds(1);
  // While the whole job is idle the wait between cycles doubles each cycle
  // up to this (HVD_IDLE_CYCLE_TIME, ms); at or below cycle_time: no back-off.
  absl::Duration idle_cycle_time = absl::Milliseconds(20);
  int64_t fusion_threshold = int64_t{64} << 20;  // bytes; 0 disables fusion
  int64_t cache_capacity = 1024;                 // 0 disables the cache
  std::string timeline_path;
  bool timeline_mark_cycles = false;
  absl::Duration stall_check_time = absl::Seconds(60);  // 0 disables
  absl::Duration stall_shutdown_time = absl::ZeroDuration();
  absl::Duration timeout = absl::Seconds(120);  // every data-plane wait
  absl::Duration start_timeout = absl::Seconds(60);
};

// Reads the environment. A process with no HVD_RANK/HVD_SIZE is a job of
// size 1. InvalidArgument naming the variable for malformed or inconsistent
// values.
absl::StatusOr<Config> ConfigFromEnv();

// How long a rank waits for work before its next cycle when the last
// `idle_cycles` cycles in a row found the job idle (ResponseList.idle).
absl::Duration CycleTimeAfter(const Config& config, int idle_cycles);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_CONFIG_H_
