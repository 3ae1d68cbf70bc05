// Tells ThreadSanitizer about absl::Mutex and absl::Notification, under
// --config=tsan only.
//
// Debian's abseil is built without ThreadSanitizer, so its Mutex (a futex
// and atomics of its own) is invisible to it: every access guarded by an
// absl::Mutex, in hvd and in gRPC alike, would be reported as a race. This
// library, linked into every binary of the tsan build (--custom_malloc),
// defines the Mutex and CondVar entry points itself: each calls abseil's
// own (found with dlsym(RTLD_NEXT)) between the __tsan_mutex_* annotations
// that an abseil built with ThreadSanitizer makes. Accesses inside abseil
// (a waiter's Condition evaluated while the lock changes hands) are ignored
// between the pre and post annotations, as they are there.
//
// It also sets ThreadSanitizer's options for every process of the build,
// whatever environment a test gives the processes it starts:
// ignore_noninstrumented_modules, because Debian's gRPC, protobuf and
// abseil are not instrumented: what they do to memory (allocate, copy,
// free, send) is invisible, and so are their hand-offs between threads
// (lock-free queues), so reports built on their accesses would be about
// nothing hvd does. Races between accesses in hvd's own code are still
// reported.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include <atomic>
#include <cstddef>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

// The next definition of `symbol` after this library's: abseil's.
template <typename Fn>
Fn Real(const char* symbol) {
  void* fn = dlsym(RTLD_NEXT, symbol);
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_mutex_annotations: %s not found: %s\n", symbol,
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

#define HVD_REAL(type, symbol)                   \
  static const auto real = Real<type>(symbol)

using Plain = void (*)(absl::Mutex*);
using Try = bool (*)(absl::Mutex*);
using When = void (*)(absl::Mutex*, const absl::Condition&);
using WhenTimeout = bool (*)(absl::Mutex*, const absl::Condition&,
                             absl::Duration);
using WhenDeadline = bool (*)(absl::Mutex*, const absl::Condition&,
                              absl::Time);
using CvWait = void (*)(absl::CondVar*, absl::Mutex*);
using CvTimeout = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);
using CvDeadline = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);
using NNotify = void (*)(absl::Notification*);
using NWait = void (*)(const absl::Notification*);
using NTimeout = bool (*)(const absl::Notification*, absl::Duration);
using NDeadline = bool (*)(const absl::Notification*, absl::Time);

// Abseil's entry points call one another (AwaitWithTimeout calls
// AwaitWithDeadline, through the symbol this library replaces): only the
// outermost call on a thread is annotated.
thread_local int depth = 0;

// Runs `call` with no annotation if an annotated call is already under way
// on this thread; else between `before` and `after`.
template <typename Call, typename Before, typename After>
auto Annotated(Call call, Before before, After after) {
  if (depth > 0) return call();
  ++depth;
  before();
  auto result = call();
  after();
  --depth;
  return result;
}

// Runs `call` (which blocks until the lock is held) as a lock acquisition.
template <typename Call>
auto Acquire(absl::Mutex* mu, unsigned flags, Call call) {
  return Annotated(
      call, [&] { __tsan_mutex_pre_lock(mu, flags); },
      [&] { __tsan_mutex_post_lock(mu, flags, 0); });
}

// Runs `call` (which releases the lock, waits, and takes it again) as a
// release followed by an acquisition.
template <typename Call>
auto ReleaseAndAcquire(absl::Mutex* mu, unsigned flags, Call call) {
  return Annotated(
      call, [&] { __tsan_mutex_pre_unlock(mu, flags); },
      [&] {
        __tsan_mutex_post_unlock(mu, flags);
        __tsan_mutex_pre_lock(mu, flags);
        __tsan_mutex_post_lock(mu, flags, 0);
      });
}

void Release(absl::Mutex* mu, unsigned flags, Plain real) {
  Annotated(
      [&] { return real(mu), 0; },
      [&] { __tsan_mutex_pre_unlock(mu, flags); },
      [&] { __tsan_mutex_post_unlock(mu, flags); });
}

// A try-lock: `call` returns whether it took the lock.
template <typename Call>
bool TryAcquire(absl::Mutex* mu, unsigned flags, Call call) {
  bool locked = false;
  Annotated(
      [&] { return locked = call(); },
      [&] { __tsan_mutex_pre_lock(mu, flags); },
      [&] {
        __tsan_mutex_post_lock(
            mu, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
      });
  return locked;
}

constexpr unsigned kRead = __tsan_mutex_read_lock;

// absl::Notification's members, to find its flag: HasBeenNotified() is
// inline, so an instrumented caller loads the flag itself and must see the
// notifier's release on that address.
struct NotificationLayout {
  absl::Mutex mutex;
  std::atomic<bool> notified;
};
static_assert(sizeof(NotificationLayout) == sizeof(absl::Notification),
              "absl::Notification's layout changed");

void* FlagOf(const absl::Notification* n) {
  return reinterpret_cast<char*>(const_cast<absl::Notification*>(n)) +
         offsetof(NotificationLayout, notified);
}

}  // namespace

extern "C" const char* __tsan_default_options() {
  return "ignore_noninstrumented_modules=1:second_deadlock_stack=1";
}

// Known third-party reports, each with its reason:
// - thread:libgpr.so: a "thread leak" of gRPC's own synchronous-server
//   thread (grpcpp_sync_server, made by grpc_core::Thread in libgpr). gRPC
//   joins the threads of a shut-down server's pool lazily, so the last one
//   may have finished unjoined when the process exits; seen now and then in
//   //core/rendezvous:rpc_fuzzer_replay. hvd makes no thread through gRPC.
// - races in gRPC's callback API (the rendezvous server's calls): its
//   reactions and ops are templates instantiated in hvd's instrumented code,
//   ordered by atomics and locks inside Debian's uninstrumented libgrpc,
//   which ThreadSanitizer does not see. hvd's own reactions make that order
//   visible for hvd's data (rendezvous_server_impl.h, Call::Order).
extern "C" const char* __tsan_default_suppressions() {
  return "thread:libgpr.so\n"
         "race:grpc::internal::CallbackBidiHandler\n"
         "race:grpc::internal::CallbackWithSuccessTag\n"
         "race:grpc::internal::CallOpSet\n"
         "race:grpc::internal::CallOpSendMessage\n";
}

namespace absl {

void Mutex::Lock() {
  HVD_REAL(Plain, "_ZN4absl7debian35Mutex4LockEv");
  Acquire(this, 0, [&] { return real(this), 0; });
}

void Mutex::ReaderLock() {
  HVD_REAL(Plain, "_ZN4absl7debian35Mutex10ReaderLockEv");
  Acquire(this, kRead, [&] { return real(this), 0; });
}

void Mutex::Unlock() {
  HVD_REAL(Plain, "_ZN4absl7debian35Mutex6UnlockEv");
  Release(this, 0, real);
}

void Mutex::ReaderUnlock() {
  HVD_REAL(Plain, "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Release(this, kRead, real);
}

bool Mutex::TryLock() {
  HVD_REAL(Try, "_ZN4absl7debian35Mutex7TryLockEv");
  return TryAcquire(this, __tsan_mutex_try_lock, [&] { return real(this); });
}

bool Mutex::ReaderTryLock() {
  HVD_REAL(Try, "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  return TryAcquire(this, __tsan_mutex_try_read_lock,
                    [&] { return real(this); });
}

void Mutex::LockWhen(const Condition& cond) {
  HVD_REAL(When, "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  Acquire(this, 0, [&] { return real(this, cond), 0; });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  HVD_REAL(When, "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquire(this, kRead, [&] { return real(this, cond), 0; });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  HVD_REAL(WhenTimeout,
           "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_"
           "8DurationE");
  return Acquire(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  HVD_REAL(WhenDeadline,
           "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_"
           "4TimeE");
  return Acquire(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  HVD_REAL(When, "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  ReleaseAndAcquire(this, 0, [&] { return real(this, cond), 0; });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  HVD_REAL(WhenTimeout,
           "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_"
           "8DurationE");
  return ReleaseAndAcquire(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  HVD_REAL(WhenDeadline,
           "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_"
           "4TimeE");
  return ReleaseAndAcquire(this, 0,
                           [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  HVD_REAL(CvWait, "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  ReleaseAndAcquire(mu, 0, [&] { return real(this, mu), 0; });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  HVD_REAL(CvTimeout,
           "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_"
           "8DurationE");
  return ReleaseAndAcquire(mu, 0, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  HVD_REAL(CvDeadline,
           "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_"
           "4TimeE");
  return ReleaseAndAcquire(mu, 0, [&] { return real(this, mu, deadline); });
}

// A notification is a release by the notifier and an acquisition by every
// waiter that sees it: abseil's own fast path (an atomic flag read in
// uninstrumented code) is invisible otherwise.
void Notification::Notify() {
  HVD_REAL(NNotify, "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  __tsan_release(FlagOf(this));
  real(this);
}

void Notification::WaitForNotification() const {
  HVD_REAL(NWait, "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  HVD_REAL(NTimeout,
           "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_"
           "8DurationE");
  bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  HVD_REAL(NDeadline,
           "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_"
           "4TimeE");
  bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

}  // namespace absl
