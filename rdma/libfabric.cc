#include "rdma/libfabric.h"

#include <dlfcn.h>
#include <signal.h>

#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hvd::rdma {
namespace {

constexpr char kLibrary[] = "libfabric.so.1";

// The signals whose handlers libinfinipath's constructor replaces.
constexpr int kSignals[] = {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM};

// dlopen(kLibrary), the program's handlers of kSignals kept. libfabric
// loads its providers' libraries, and libinfinipath's constructor installs
// a backtrace-and-exit handler for kSignals (unless IPATH_NO_BACKTRACE is
// set): Ctrl-C or SIGTERM would then end the program inside a signal
// handler, its exit() recursing into locks the interrupted thread holds,
// and leave *.btr files behind. RTLD_LOCAL: libfabric's symbols stay out of
// the global scope, where they would otherwise meet the program's.
void* OpenKeepingSignals() {
  struct sigaction before[std::size(kSignals)];
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    sigaction(kSignals[i], nullptr, &before[i]);
  }
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    sigaction(kSignals[i], &before[i], nullptr);
  }
  return library;
}

// `*slot` = the function `name` at `version`, unless an earlier Bind failed
// (`error` set); sets `error` if the library has none.
template <typename F>
void Bind(void* library, const char* name, const char* version, F* slot,
          std::string* error) {
  if (!error->empty()) return;
  void* found = dlvsym(library, name, version);
  if (found == nullptr) {
    *error = absl::StrCat(kLibrary, " has no ", name, "@", version);
    return;
  }
  *slot = reinterpret_cast<F>(found);
}

// The loaded API, or why it could not be loaded. Once per process: a
// library that is missing stays missing.
struct Loaded {
  LibfabricApi api{};
  std::string error;

  Loaded() {
    void* library = OpenKeepingSignals();
    if (library == nullptr) {
      const char* why = dlerror();
      error = absl::StrCat("cannot load ", kLibrary, " (",
                           why != nullptr ? why : "unknown error",
                           "); install libfabric1 for the RDMA transport");
      return;
    }
    // The versions a program compiled against 1.17's headers and linked
    // with -lfabric records (readelf --dyn-syms).
    // The first missing one sets `error`, which Libfabric() then returns.
    // The library stays loaded for the process's life either way: the
    // providers it loaded may have started threads.
    Bind(library, "fi_getinfo", "FABRIC_1.3", &api.getinfo, &error);
    Bind(library, "fi_freeinfo", "FABRIC_1.3", &api.freeinfo, &error);
    Bind(library, "fi_dupinfo", "FABRIC_1.3", &api.dupinfo, &error);
    Bind(library, "fi_fabric", "FABRIC_1.1", &api.fabric, &error);
    Bind(library, "fi_strerror", "FABRIC_1.0", &api.strerror, &error);
  }
};

}  // namespace

absl::StatusOr<const LibfabricApi*> Libfabric() {
  static const Loaded* const loaded = new Loaded();
  if (!loaded->error.empty()) {
    return absl::FailedPreconditionError(loaded->error);
  }
  return &loaded->api;
}

}  // namespace hvd::rdma
