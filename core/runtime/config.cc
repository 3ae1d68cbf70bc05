#include "core/runtime/config.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/common/env.h"

namespace hvd::runtime {
namespace {

std::string LocalHostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

absl::Status ReadTopology(Config& c) {
  auto get = [](absl::string_view name, int fallback, int* out) {
    auto value = GetConfigInt(name, fallback);
    if (!value.ok()) return value.status();
    *out = static_cast<int>(*value);
    return absl::OkStatus();
  };
  for (auto [name, fallback, out] :
       {std::tuple{"RANK", 0, &c.rank}, {"SIZE", 1, &c.size},
        {"LOCAL_RANK", c.rank, &c.local_rank}}) {
    if (auto s = get(name, fallback, out); !s.ok()) return s;
  }
  if (auto s = get("LOCAL_SIZE", c.size, &c.local_size); !s.ok()) return s;
  if (auto s = get("CROSS_RANK", 0, &c.cross_rank); !s.ok()) return s;
  if (auto s = get("CROSS_SIZE", 1, &c.cross_size); !s.ok()) return s;
  if (c.size < 1 || c.rank < 0 || c.rank >= c.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HVD_RANK=", c.rank, " and HVD_SIZE=", c.size,
        " are inconsistent: need 0 <= rank < size"));
  }
  if (c.local_rank < 0 || c.local_rank >= c.local_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HVD_LOCAL_RANK=", c.local_rank, " and HVD_LOCAL_SIZE=", c.local_size,
        " are inconsistent"));
  }
  return absl::OkStatus();
}

absl::Status ReadTunables(Config& c) {
  // `name` in units a thousand times `grain` (seconds read to the
  // millisecond, milliseconds to the microsecond), fractions allowed.
  auto duration = [](absl::string_view name, double fallback,
                     absl::Duration grain, absl::Duration* out) {
    auto value = GetConfigDouble(name, fallback);
    if (!value.ok()) return value.status();
    *out = static_cast<int64_t>(*value * 1000) * grain;
    return absl::OkStatus();
  };
  auto millis = [&](absl::string_view name, double fallback,
                    absl::Duration* out) {
    return duration(name, fallback, absl::Microseconds(1), out);
  };
  if (auto s = millis("CYCLE_TIME", 1.0, &c.cycle_time); !s.ok()) return s;
  if (auto s = millis("IDLE_CYCLE_TIME", 20.0, &c.idle_cycle_time); !s.ok()) {
    return s;
  }
  auto fusion = GetConfigInt("FUSION_THRESHOLD", c.fusion_threshold);
  if (!fusion.ok()) return fusion.status();
  c.fusion_threshold = *fusion;
  auto cache = GetConfigInt("CACHE_CAPACITY", c.cache_capacity);
  if (!cache.ok()) return cache.status();
  c.cache_capacity = *cache;
  if (c.fusion_threshold < 0 || c.cache_capacity < 0 ||
      c.cycle_time < absl::ZeroDuration() ||
      c.idle_cycle_time < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "HVD_FUSION_THRESHOLD, HVD_CACHE_CAPACITY, HVD_CYCLE_TIME and "
        "HVD_IDLE_CYCLE_TIME must not be negative");
  }
  auto secs = [&](absl::string_view name, double fallback,
                  absl::Duration* out) {
    return duration(name, fallback, absl::Milliseconds(1), out);
  };
  if (auto s = secs("STALL_CHECK_TIME_SECONDS", 60, &c.stall_check_time);
      !s.ok()) {
    return s;
  }
  if (auto off = GetConfigBool("STALL_CHECK_DISABLE", false); !off.ok()) {
    return off.status();
  } else if (*off) {
    c.stall_check_time = absl::ZeroDuration();
  }
  if (auto s = secs("STALL_SHUTDOWN_TIME_SECONDS", 0, &c.stall_shutdown_time);
      !s.ok()) {
    return s;
  }
  if (auto s = secs("TIMEOUT_SECONDS", 120, &c.timeout); !s.ok()) return s;
  return secs("START_TIMEOUT", 60, &c.start_timeout);
}

}  // namespace

absl::Duration CycleTimeAfter(const Config& config, int idle_cycles) {
  absl::Duration wait = config.cycle_time;
  if (wait <= absl::ZeroDuration()) return wait;  // doubling leaves it at 0
  for (int i = 0; i < idle_cycles && wait < config.idle_cycle_time; ++i) {
    wait = std::min(wait * 2, config.idle_cycle_time);
  }
  return wait;
}

absl::StatusOr<Config> ConfigFromEnv() {
  Config c;
  if (auto s = ReadTopology(c); !s.ok()) return s;
  c.hostname = GetConfig("HOSTNAME").value_or(LocalHostname());
  c.rendezvous_addr = GetConfig("RENDEZVOUS_ADDR").value_or("");
  c.token = GetConfig("JOB_TOKEN").value_or("");
  c.iface = GetConfig("IFACE").value_or("");
  c.timeline_path = GetConfig("TIMELINE").value_or("");
  if (auto mark = GetConfigBool("TIMELINE_MARK_CYCLES", false); mark.ok()) {
    c.timeline_mark_cycles = *mark;
  } else {
    return mark.status();
  }
  if (c.size > 1 && c.rendezvous_addr.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HVD_SIZE=", c.size,
        " but HVD_RENDEZVOUS_ADDR is not set: start the job with hvdrun, or "
        "point the workers at a rendezvous server"));
  }
  if (auto s = ReadTunables(c); !s.ok()) return s;
  return c;
}

}  // namespace hvd::runtime
