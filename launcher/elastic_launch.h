// What hvdrun makes of an elastic job's flags: the driver's settings, and
// the host discovery it starts before anything else.
#ifndef HVD_LAUNCHER_ELASTIC_LAUNCH_H_
#define HVD_LAUNCHER_ELASTIC_LAUNCH_H_

#include <memory>

#include "absl/status/statusor.h"
#include "host/process.h"
#include "launcher/elastic_driver.h"
#include "launcher/host_discovery.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {

// The settings of a valid elastic job's options (ValidateOptions passed):
// -np defaults to --min-np and --min-np to -np; --elastic-timeout to
// HVD_ELASTIC_TIMEOUT / HOROVOD_ELASTIC_TIMEOUT, else 600 s.
absl::StatusOr<ElasticSettings> ElasticSettingsOf(const Options& o);

// The fixed -H / --hostfile list, or the discovery script, run once now:
// its failure (quoting the script's stderr) means the job does not start.
absl::StatusOr<std::unique_ptr<HostDiscovery>> StartHostDiscovery(
    const Options& o, host::Os* os);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_ELASTIC_LAUNCH_H_
