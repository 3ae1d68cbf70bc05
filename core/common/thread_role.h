// How hvd's own threads show themselves to the operating system: by a name
// (top -H, ps -L, gdb, perf and /proc show it), and, for a thread that
// stands by for work the ranks' own threads usually do themselves, by a
// scheduling class whose wake-ups do not take a busy core.
#ifndef HVD_CORE_COMMON_THREAD_ROLE_H_
#define HVD_CORE_COMMON_THREAD_ROLE_H_

namespace hvd {

// Names the calling thread: "hvd-" and its role, at most 15 characters
// (Linux keeps no more; a longer name is cut there).
void NameThisThread(const char* name);

// Puts the calling thread under SCHED_BATCH. It keeps its share of the CPU,
// but waking it never preempts the thread running on its core: it runs when
// the core is free, or when that thread's turn ends. For a thread woken
// often to find its work already taken by a thread that is busy doing it
// (on a rank bound to one core, every such wake-up is two context switches
// in the middle of that thread's copy). Where the system refuses, the
// thread stays as it was; logged.
void StandByWithoutPreempting();

}  // namespace hvd

#endif  // HVD_CORE_COMMON_THREAD_ROLE_H_
