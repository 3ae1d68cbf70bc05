// The version hvdrun and hvd-agent print for --version: one number for both,
// since each host's agent must speak the launcher's protocol.
#ifndef HVD_HOST_VERSION_H_
#define HVD_HOST_VERSION_H_

namespace hvd {
namespace host {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_VERSION_H_
