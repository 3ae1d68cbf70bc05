// horovodrun's --config-file: a YAML file of sections (params, autotune,
// timeline, stall_check, library_options, logging) and a controller, whose
// keys stand for horovodrun's flags. Read into the flags they stand for, so
// that a key means exactly what its flag means (flag_table.h).
#ifndef HVD_LAUNCHER_CONFIG_FILE_H_
#define HVD_LAUNCHER_CONFIG_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hvd {
namespace launcher {

// One key of the file, as the flag it stands for.
struct ConfigSetting {
  std::string key;                  // "params.cycle_time_ms", for messages
  std::string flag;                 // "--cycle-time-ms"
  std::vector<std::string> values;  // the flag's values (none for a switch)
};

// The settings in the file at `path`, in file order. A key hvd does not know
// adds a line to `notes` and is skipped, as horovodrun skips it.
// InvalidArgument, naming the file (and key), if the file cannot be read or
// parsed, a section is not a mapping, a switch is not true or false, or the
// controller is not gloo or mpi.
absl::StatusOr<std::vector<ConfigSetting>> ReadConfigFile(
    const std::string& path, std::vector<std::string>* notes);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_CONFIG_FILE_H_
