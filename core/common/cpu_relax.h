// The spin-wait hint for busy loops that poll memory another thread or
// process writes (x86 PAUSE, Arm YIELD; nothing elsewhere).
#ifndef HVD_CORE_COMMON_CPU_RELAX_H_
#define HVD_CORE_COMMON_CPU_RELAX_H_

namespace hvd {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace hvd

#endif  // HVD_CORE_COMMON_CPU_RELAX_H_
