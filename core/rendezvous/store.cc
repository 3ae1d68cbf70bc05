#include "core/rendezvous/store.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace hvd {

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  return base_->Set(absl::StrCat(prefix_, key), value);
}

absl::StatusOr<std::string> PrefixStore::Get(absl::string_view key,
                                             absl::Duration timeout) {
  return base_->Get(absl::StrCat(prefix_, key), timeout);
}

absl::Status PrefixStore::Barrier(absl::string_view name, int count,
                                  absl::Duration timeout) {
  return base_->Barrier(absl::StrCat(prefix_, name), count, timeout);
}

absl::Status CancellableStore::Set(absl::string_view key,
                                  absl::string_view value) {
  if (cancel_->cancelled()) return cancel_->status();
  return base_->Set(key, value);
}

absl::StatusOr<std::string> CancellableStore::Get(absl::string_view key,
                                                  absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (cancel_->cancelled()) return cancel_->status();
    const absl::Duration left = deadline - absl::Now();
    absl::StatusOr<std::string> value =
        base_->Get(key, std::max(absl::ZeroDuration(), std::min(left, poll_)));
    if (!absl::IsDeadlineExceeded(value.status()) || left <= poll_) {
      if (!value.ok() && absl::IsDeadlineExceeded(value.status())) {
        return absl::DeadlineExceededError(
            absl::StrCat("key '", key, "' not set within ",
                         absl::FormatDuration(timeout)));
      }
      return value;
    }
  }
}

absl::Status CancellableStore::Barrier(absl::string_view name, int count,
                                       absl::Duration timeout) {
  if (cancel_->cancelled()) return cancel_->status();
  return base_->Barrier(name, count, timeout);
}

namespace {

class InMemoryStore : public Store {
 public:
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    absl::MutexLock lock(&mu_);
    values_[std::string(key)] = std::string(value);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    const std::string k(key);
    absl::MutexLock lock(&mu_);
    auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return values_.count(k) > 0;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&present), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "key '", key, "' not set within ", absl::FormatDuration(timeout)));
    }
    return values_[k];
  }

  absl::Status Barrier(absl::string_view name, int count,
                       absl::Duration timeout) override {
    const std::string n(name);
    absl::MutexLock lock(&mu_);
    int& arrived = barriers_[n];
    ++arrived;
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return barriers_[n] >= count;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("barrier '", name, "': ", barriers_[n], " of ", count,
                       " arrived within ", absl::FormatDuration(timeout)));
    }
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> barriers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Store> NewInMemoryStore() {
  return std::make_unique<InMemoryStore>();
}

}  // namespace hvd
