// Memory registrations of user buffers, shared while in use.
//
// A registration is looked up by its exact [address, length) and shared by
// every request that names that range while any of them is pending; when
// the last one releases it, it is deregistered and forgotten ("invalidate on
// deregistration"). The cache never keeps a registration of memory it
// cannot prove is still the same allocation: a transport sees pointers, not
// free() or munmap(), and a registration kept across them would, on verbs,
// point the NIC at the pages of the freed buffer while a new allocation at
// the same address uses others. Cross-request reuse on hardware comes from
// libfabric's own registration cache beneath fi_mr_reg (verbs, efa), which
// watches munmap/free through its memory monitor (FI_MR_CACHE_MONITOR)
// and so can invalidate safely. docs/rdma.md has the reasoning.
//
// Thread-safe. Registrations must be released before the cache (and the
// domain) goes.
#ifndef HVD_RDMA_REGISTRATION_CACHE_H_
#define HVD_RDMA_REGISTRATION_CACHE_H_

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hvd::rdma {

class RegistrationCache;

// One registered range. Destroying the last shared_ptr deregisters it.
class Registration {
 public:
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  // Local descriptor for fi_write / fi_send (null when the provider needs
  // none).
  void* desc() const { return desc_; }
  uint64_t key() const { return key_; }
  // The remote address a peer writes to for byte `offset` of the range:
  // the virtual address under FI_MR_VIRT_ADDR, else the offset.
  uint64_t RemoteAddress(size_t offset) const { return remote_base_ + offset; }

 private:
  friend class RegistrationCache;
  Registration() = default;

  RegistrationCache* cache_ = nullptr;
  fid_mr* mr_ = nullptr;
  void* desc_ = nullptr;
  uint64_t key_ = 0;
  uint64_t remote_base_ = 0;
  std::pair<uintptr_t, size_t> range_;
};

struct RegistrationStats {
  uint64_t lookups = 0;        // Acquire calls
  uint64_t hits = 0;           // served by a live registration
  uint64_t registrations = 0;  // fi_mr_reg calls
  double register_seconds = 0;  // time spent in fi_mr_reg
  uint64_t live = 0;           // registrations held now
};

class RegistrationCache {
 public:
  // `max_entry_bytes`: the longest range one registration may cover.
  RegistrationCache(fid_domain* domain, bool virt_addr, bool prov_key,
                    size_t max_entry_bytes);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  size_t max_entry_bytes() const { return max_entry_bytes_; }

  // The registration of [addr, addr + len), for local and remote writes.
  // InvalidArgument when len is 0 or above max_entry_bytes(); Unavailable
  // naming the range when the provider refuses.
  absl::StatusOr<std::shared_ptr<Registration>> Acquire(const void* addr,
                                                        size_t len);

  RegistrationStats stats() const;

 private:
  friend class Registration;
  void Forget(Registration* registration);

  fid_domain* const domain_;
  const bool virt_addr_;
  const bool prov_key_;
  const size_t max_entry_bytes_;

  mutable absl::Mutex mu_;
  std::map<std::pair<uintptr_t, size_t>, std::weak_ptr<Registration>> live_
      ABSL_GUARDED_BY(mu_);
  RegistrationStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace hvd::rdma

#endif  // HVD_RDMA_REGISTRATION_CACHE_H_
