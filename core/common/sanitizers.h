// Whether this translation unit is built under a sanitizer. gcc defines
// __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang answers
// __has_feature. Tests use it to run their big sweeps at a smaller scale (a
// sanitizer finds a race or an overrun in the first chunks as surely as in
// the thousandth) and to skip what measures speed under load.
#ifndef HVD_CORE_COMMON_SANITIZERS_H_
#define HVD_CORE_COMMON_SANITIZERS_H_

namespace hvd {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

}  // namespace hvd

#endif  // HVD_CORE_COMMON_SANITIZERS_H_
