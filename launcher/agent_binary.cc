#include "launcher/agent_binary.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "host/process.h"

namespace hvd {
namespace launcher {
namespace {

bool Executable(const std::string& path) {
  return access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string HvdrunDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

absl::StatusOr<std::string> LocalAgentPath(const Options& o) {
  std::string given = o.agent_path;
  if (given.empty() && getenv("HVD_AGENT_PATH") != nullptr) {
    given = getenv("HVD_AGENT_PATH");
  }
  const char* path_env = getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  if (!given.empty()) return host::FindProgram(given, path);
  std::string dir = HvdrunDir();
  for (const std::string& c :
       {dir + "/hvd-agent", dir + "/../agent/hvd-agent"}) {
    if (!dir.empty() && Executable(c)) return c;
  }
  absl::StatusOr<std::string> p = host::FindProgram("hvd-agent", path);
  if (!p.ok()) {
    return absl::NotFoundError(
        "cannot find hvd-agent next to hvdrun or on PATH (give --agent-path)");
  }
  return p;
}

std::string RemoteAgentPath(const Options& o) {
  if (!o.agent_path.empty()) return o.agent_path;
  if (const char* p = getenv("HVD_AGENT_PATH")) return p;
  return "hvd-agent";
}

}  // namespace launcher
}  // namespace hvd
