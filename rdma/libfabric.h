// libfabric's exported functions, found in libfabric.so.1 when the RDMA
// transport first needs them instead of linked into every program.
//
// Linking libfabric loads the libraries of its providers with it, and one of
// them (libinfinipath, under the psm provider) times the CPU in its
// constructor: about 0.2 s of sleeps, with the loading thread pinned to one
// CPU meanwhile, in every process that loaded libhvd.so, RDMA or not. Loaded
// here, only a process that asks for a provider pays it.
//
// The rest of libfabric's API (fi_domain, fi_cq_read, fi_close, ...) is
// inline, calling through the objects these functions return, and needs
// nothing from here.
#ifndef HVD_RDMA_LIBFABRIC_H_
#define HVD_RDMA_LIBFABRIC_H_

#include <rdma/fabric.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace hvd::rdma {

// Each is bound at the symbol version that libfabric 1.17's headers name, as
// a link with -lfabric binds it. (A lookup without a version would find the
// oldest, the 1.0 ABI, whose domains address remote writes differently.)
struct LibfabricApi {
  int (*getinfo)(uint32_t version, const char* node, const char* service,
                 uint64_t flags, const fi_info* hints, fi_info** info);
  void (*freeinfo)(fi_info* info);
  // fi_allocinfo() is dupinfo(nullptr).
  fi_info* (*dupinfo)(const fi_info* info);
  int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
  const char* (*strerror)(int errnum);
};

// The functions, libfabric.so.1 loaded by the first call (any thread; later
// calls return the same). FailedPrecondition naming the library and what
// the loader said where it is missing or lacks one of them, every time.
absl::StatusOr<const LibfabricApi*> Libfabric();

}  // namespace hvd::rdma

#endif  // HVD_RDMA_LIBFABRIC_H_
