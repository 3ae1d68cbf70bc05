// hvd's version: what hvdrun and hvd-agent print for --version (one number
// for both, since each host's agent must speak the launcher's protocol) and
// what the C ABI's hvd_version() returns. The Python package's __version__
// (python/hvd/__init__.py, and so the wheel's) is checked against it by
// //python/tests:check_build_test.
#ifndef HVD_CORE_COMMON_VERSION_H_
#define HVD_CORE_COMMON_VERSION_H_

namespace hvd {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace hvd

#endif  // HVD_CORE_COMMON_VERSION_H_
