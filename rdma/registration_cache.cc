#include "rdma/registration_cache.h"

#include <rdma/fi_errno.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rdma/fabric.h"

namespace hvd::rdma {

Registration::~Registration() {
  if (cache_ != nullptr) cache_->Forget(this);
  if (mr_ != nullptr) fi_close(&mr_->fid);
}

RegistrationCache::RegistrationCache(fid_domain* domain, bool virt_addr,
                                     bool prov_key, size_t max_entry_bytes)
    : domain_(domain),
      virt_addr_(virt_addr),
      prov_key_(prov_key),
      max_entry_bytes_(max_entry_bytes) {}

RegistrationCache::~RegistrationCache() = default;

absl::StatusOr<std::shared_ptr<Registration>> RegistrationCache::Acquire(
    const void* addr, size_t len) {
  if (len == 0 || len > max_entry_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("registration of ", len, " bytes: must be 1 to ",
                     max_entry_bytes_));
  }
  const std::pair<uintptr_t, size_t> range(reinterpret_cast<uintptr_t>(addr),
                                           len);
  absl::MutexLock lock(&mu_);
  ++stats_.lookups;
  if (auto it = live_.find(range); it != live_.end()) {
    if (std::shared_ptr<Registration> held = it->second.lock()) {
      ++stats_.hits;
      return held;
    }
  }
  std::shared_ptr<Registration> reg(new Registration);
  const uint64_t requested_key = prov_key_ ? 0 : next_key_++;
  const absl::Time start = absl::Now();
  // Registering under the lock keeps two requests for one range from both
  // registering it; registration is rare next to lookups.
  const int rc = fi_mr_reg(domain_, addr, len,
                           FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE, 0,
                           requested_key, 0, &reg->mr_, nullptr);
  stats_.register_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  ++stats_.registrations;
  if (rc != 0) {
    reg->mr_ = nullptr;
    return absl::UnavailableError(absl::StrCat(
        "registering ", len, " bytes at ", absl::Hex(range.first), ": ",
        FiError("fi_mr_reg", rc)));
  }
  reg->cache_ = this;
  reg->desc_ = fi_mr_desc(reg->mr_);
  reg->key_ = fi_mr_key(reg->mr_);
  reg->remote_base_ = virt_addr_ ? range.first : 0;
  reg->range_ = range;
  live_[range] = reg;
  ++stats_.live;
  return reg;
}

void RegistrationCache::Forget(Registration* registration) {
  absl::MutexLock lock(&mu_);
  --stats_.live;
  auto it = live_.find(registration->range_);
  // A newer registration of the same range may have replaced this one
  // (looked up while this one was being destroyed): keep that.
  if (it != live_.end() && it->second.expired()) live_.erase(it);
}

RegistrationStats RegistrationCache::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace hvd::rdma
