#include "core/rendezvous/store.h"

#include <algorithm>
#include <map>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/common/annotate.h"

namespace hvd {

absl::StatusOr<std::vector<std::string>> Store::GetMany(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> value =
        Get(key, std::max(absl::ZeroDuration(), deadline - absl::Now()));
    if (!value.ok()) return value.status();
    values.push_back(*std::move(value));
  }
  return values;
}

std::vector<int> RankRange(int begin, int end, int skip) {
  std::vector<int> ranks;
  for (int r = begin; r < end; ++r) {
    if (r != skip) ranks.push_back(r);
  }
  return ranks;
}

absl::StatusOr<std::vector<std::string>> GetOfRanks(
    Store& store, absl::string_view prefix, const std::vector<int>& ranks,
    absl::Duration timeout) {
  std::vector<std::string> keys;
  keys.reserve(ranks.size());
  for (int rank : ranks) keys.push_back(absl::StrCat(prefix, rank));
  return store.GetMany(keys, timeout);
}

absl::StatusOr<std::string> GatherThroughRoot(
    Store& store, absl::string_view prefix, int index, int size,
    absl::string_view mine, absl::string_view what,
    absl::FunctionRef<std::string(const std::vector<std::string>&)> combine,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string all_key = absl::StrCat(prefix, "all");
  if (absl::Status s = store.Set(absl::StrCat(prefix, index), mine);
      !s.ok()) {
    return Annotate(s, absl::StrCat("publishing its part of ", what));
  }
  if (index != 0) {
    absl::StatusOr<std::string> all =
        store.Get(all_key, deadline - absl::Now());
    if (!all.ok()) {
      return Annotate(all.status(),
                      absl::StrCat("reading what member 0 gathers of ", what));
    }
    return all;
  }
  auto records = GetOfRanks(store, prefix, RankRange(0, size),
                            deadline - absl::Now());
  if (!records.ok()) {
    return Annotate(records.status(), absl::StrCat("reading ", what));
  }
  std::string all = combine(*records);
  if (absl::Status s = store.Set(all_key, all); !s.ok()) {
    return Annotate(s, absl::StrCat("publishing ", what));
  }
  return all;
}

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  return base_->Set(absl::StrCat(prefix_, key), value);
}

absl::StatusOr<std::string> PrefixStore::Get(absl::string_view key,
                                             absl::Duration timeout) {
  return base_->Get(absl::StrCat(prefix_, key), timeout);
}

absl::StatusOr<std::vector<std::string>> PrefixStore::GetMany(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) {
    prefixed.push_back(absl::StrCat(prefix_, key));
  }
  return base_->GetMany(prefixed, timeout);
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

namespace {

// `get(slice)` (a Get or GetMany of the base store) in slices of `poll` until
// `timeout`, checking `cancel` before each. When the whole `timeout` passes,
// DeadlineExceeded with `timed_out(last slice's status)`.
template <typename T, typename GetFn>
absl::StatusOr<T> InSlices(
    const Cancellation& cancel, absl::Duration poll, absl::Duration timeout,
    absl::FunctionRef<std::string(const absl::Status&)> timed_out, GetFn get) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (cancel.cancelled()) return cancel.status();
    const absl::Duration left = deadline - absl::Now();
    absl::StatusOr<T> value =
        get(std::max(absl::ZeroDuration(), std::min(left, poll)));
    if (!absl::IsDeadlineExceeded(value.status()) || left <= poll) {
      if (!value.ok() && absl::IsDeadlineExceeded(value.status())) {
        return absl::DeadlineExceededError(timed_out(value.status()));
      }
      return value;
    }
  }
}

}  // namespace

absl::StatusOr<std::string> CancellableStore::Get(absl::string_view key,
                                                  absl::Duration timeout) {
  return InSlices<std::string>(
      *cancel_, poll_, timeout,
      [&](const absl::Status&) {
        return absl::StrCat("key '", key, "' not set within ",
                            absl::FormatDuration(timeout));
      },
      [&](absl::Duration slice) { return base_->Get(key, slice); });
}

absl::StatusOr<std::vector<std::string>> CancellableStore::GetMany(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  return InSlices<std::vector<std::string>>(
      *cancel_, poll_, timeout,
      [&](const absl::Status& last) {
        return absl::StrCat(last.message(), " (of a wait of ",
                            absl::FormatDuration(timeout), ")");
      },
      [&](absl::Duration slice) { return base_->GetMany(keys, slice); });
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
