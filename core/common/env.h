// Reads hvd's configuration from the environment. Every HVD_X is also
// accepted as HOROVOD_X so existing Horovod job scripts keep working; when both
// are set, HVD_X wins.
#ifndef HVD_CORE_COMMON_ENV_H_
#define HVD_CORE_COMMON_ENV_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace hvd {

// `name` without prefix, e.g. "FUSION_THRESHOLD". nullopt when neither
// spelling is set.
std::optional<std::string> GetConfig(absl::string_view name);

// A variable of another tool, by its full name (e.g. "SLURM_PROCID");
// nullopt when unset.
std::optional<std::string> GetForeignEnv(absl::string_view full_name);

// The parsed value, `fallback` when unset, InvalidArgument naming the variable
// and the bad text when it does not parse.
absl::StatusOr<int64_t> GetConfigInt(absl::string_view name, int64_t fallback);
absl::StatusOr<double> GetConfigDouble(absl::string_view name, double fallback);
// Accepts 1/0, true/false, yes/no, on/off (any case).
absl::StatusOr<bool> GetConfigBool(absl::string_view name, bool fallback);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_ENV_H_
