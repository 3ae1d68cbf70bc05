// Why yaml-cpp: Horovod's config file is YAML, and yaml-cpp is Debian's
// well-kept C++ YAML parser (line and column in its errors, a node tree that
// reads like the file). libyaml's event API would need a hand-written tree.
#include "launcher/config_file.h"

#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace hvd {
namespace launcher {
namespace {

// A key of a section. `flag` null: known, and nothing to do here. `no_flag`
// null: the key's value is the flag's value; else the key is a switch, true
// giving `flag` and false `no_flag`.
struct Key {
  const char* name;
  const char* flag;
  const char* no_flag = nullptr;
};

const std::map<std::string, std::vector<Key>>& Sections() {
  static const auto* sections = new std::map<std::string, std::vector<Key>>{
      {"params",
       {{"fusion_threshold_mb", "--fusion-threshold-mb"},
        {"cycle_time_ms", "--cycle-time-ms"},
        {"cache_capacity", "--cache-capacity"},
        {"hierarchical_allreduce", "--hierarchical-allreduce",
         "--no-hierarchical-allreduce"},
        {"hierarchical_allgather", "--hierarchical-allgather",
         "--no-hierarchical-allgather"},
        {"torus_allreduce", "--torus-allreduce", "--no-torus-allreduce"}}},
      {"autotune",
       {{"enabled", "--autotune", "--no-autotune"},
        {"log_file", "--autotune-log-file"},
        {"warmup_samples", "--autotune-warmup-samples"},
        {"steps_per_sample", "--autotune-steps-per-sample"},
        {"bayes_opt_max_samples", "--autotune-bayes-opt-max-samples"},
        {"gaussian_process_noise", "--autotune-gaussian-process-noise"}}},
      {"timeline",
       {{"filename", "--timeline-filename"},
        {"mark_cycles", "--timeline-mark-cycles",
         "--no-timeline-mark-cycles"}}},
      {"stall_check",
       {{"enabled", "--stall-check", "--no-stall-check"},
        {"warning_time_seconds", "--stall-check-warning-time-seconds"},
        {"shutdown_time_seconds", "--stall-check-shutdown-time-seconds"}}},
      {"library_options",
       {{"mpi_threads_disable", "--mpi-threads-disable",
         "--no-mpi-threads-disable"},
        {"num_nccl_streams", "--num-nccl-streams"},
        {"thread_affinity", "--thread-affinity"},
        {"gloo_timeout_seconds", "--gloo-timeout-seconds"}}},
      {"logging",
       {{"level", "--log-level"},
        {"with_timestamp", "--log-with-timestamp", "--log-without-timestamp"},
        {"hide_timestamp", "--log-hide-timestamp", "--no-log-hide-timestamp"}}},
  };
  return *sections;
}

absl::Status Bad(const std::string& path, const std::string& key,
                 absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("--config-file ", path, ": ", key, ": ", what));
}

// The setting for `key` = `node`; nullopt for a key with no value.
absl::StatusOr<std::optional<ConfigSetting>> Setting(const std::string& path,
                                                     const std::string& key,
                                                     const Key& k,
                                                     const YAML::Node& node) {
  if (node.IsNull() || k.flag == nullptr) return std::nullopt;
  if (!node.IsScalar()) return Bad(path, key, "expected a single value");
  ConfigSetting s{key, k.flag, {}};
  if (k.no_flag == nullptr) {
    s.values.push_back(node.Scalar());
    return s;
  }
  bool on;
  if (!YAML::convert<bool>::decode(node, on)) {
    return Bad(path, key,
               absl::StrCat("expected true or false, got '", node.Scalar(),
                            "'"));
  }
  if (!on) s.flag = k.no_flag;
  return s;
}

absl::Status ReadSection(const std::string& path, const std::string& name,
                         const YAML::Node& section,
                         std::vector<ConfigSetting>* out,
                         std::vector<std::string>* notes) {
  if (section.IsNull()) return absl::OkStatus();
  if (!section.IsMap()) return Bad(path, name, "expected a mapping of keys");
  const std::vector<Key>& keys = Sections().at(name);
  for (const auto& entry : section) {
    const std::string key = absl::StrCat(name, ".", entry.first.Scalar());
    const Key* known = nullptr;
    for (const Key& k : keys) {
      if (entry.first.Scalar() == k.name) known = &k;
    }
    if (known == nullptr) {
      notes->push_back(absl::StrCat("--config-file ", path, ": unknown key ",
                                    key, "; ignored"));
      continue;
    }
    auto setting = Setting(path, key, *known, entry.second);
    if (!setting.ok()) return setting.status();
    if (setting->has_value()) out->push_back(**setting);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ConfigSetting>> ReadTree(
    const std::string& path, const YAML::Node& root,
    std::vector<std::string>* notes) {
  std::vector<ConfigSetting> out;
  if (root.IsNull()) return out;  // an empty file
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--config-file ", path, ": expected a mapping of sections"));
  }
  for (const auto& entry : root) {
    const std::string name = entry.first.Scalar();
    if (name == "controller") {
      const std::string c =
          entry.second.IsScalar() ? entry.second.Scalar() : "";
      if (c != "gloo" && c != "mpi") {
        return Bad(path, name, absl::StrCat("expected gloo or mpi, got '",
                                            c, "'"));
      }
      out.push_back(ConfigSetting{name, absl::StrCat("--", c), {}});
    } else if (Sections().count(name)) {
      absl::Status s = ReadSection(path, name, entry.second, &out, notes);
      if (!s.ok()) return s;
    } else {
      notes->push_back(absl::StrCat("--config-file ", path,
                                    ": unknown section ", name, "; ignored"));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ConfigSetting>> ReadConfigFile(
    const std::string& path, std::vector<std::string>* notes) {
  try {
    return ReadTree(path, YAML::LoadFile(path), notes);
  } catch (const YAML::BadFile&) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config-file ", path, ": cannot read the file"));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config-file ", path, ": not YAML: ", e.what()));
  }
}

}  // namespace launcher
}  // namespace hvd
