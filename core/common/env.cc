#include "core/common/env.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hvd {
namespace {

absl::Status BadValue(absl::string_view name, absl::string_view value,
                      absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("HVD_", name, "='", value,
                                                 "' is not ", expected));
}

}  // namespace

std::optional<std::string> GetConfig(absl::string_view name) {
  for (const char* prefix : {"HVD_", "HOROVOD_"}) {
    const std::string full = absl::StrCat(prefix, name);
    if (const char* value = std::getenv(full.c_str())) return std::string(value);
  }
  return std::nullopt;
}

std::optional<std::string> GetForeignEnv(absl::string_view full_name) {
  const char* value = std::getenv(std::string(full_name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<int64_t> GetConfigInt(absl::string_view name, int64_t fallback) {
  const auto value = GetConfig(name);
  if (!value) return fallback;
  int64_t result;
  if (!absl::SimpleAtoi(*value, &result)) {
    return BadValue(name, *value, "an integer");
  }
  return result;
}

absl::StatusOr<double> GetConfigDouble(absl::string_view name, double fallback) {
  const auto value = GetConfig(name);
  if (!value) return fallback;
  double result;
  if (!absl::SimpleAtod(*value, &result)) {
    return BadValue(name, *value, "a number");
  }
  return result;
}

absl::StatusOr<bool> GetConfigBool(absl::string_view name, bool fallback) {
  const auto value = GetConfig(name);
  if (!value) return fallback;
  const std::string v = absl::AsciiStrToLower(*value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) {
    return false;
  }
  return BadValue(name, *value, "a boolean (1/0, true/false)");
}

}  // namespace hvd
