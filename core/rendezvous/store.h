// Key-value store the core bootstraps through: peers publish their data-plane
// addresses and NCCL unique ids here. Implemented over gRPC against the
// rendezvous server (grpc_store.h) and in memory for one-process tests.
#ifndef HVD_CORE_RENDEZVOUS_STORE_H_
#define HVD_CORE_RENDEZVOUS_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/common/cancellation.h"

namespace hvd {

// Thread-safe. Keys are write-once per job by convention; Set on an existing
// key overwrites it.
class Store {
 public:
  virtual ~Store() = default;

  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Blocks until `key` exists. DeadlineExceeded naming the key when `timeout`
  // passes first; Unavailable when the store cannot be reached.
  virtual absl::StatusOr<std::string> Get(absl::string_view key,
                                          absl::Duration timeout) = 0;

  // The values of `keys`, in their order, once every one exists: in one
  // round trip where the store can (the gRPC store's GetMany), key by key
  // within the one `timeout` otherwise. Errors as Get's, for the first key
  // that fails.
  virtual absl::StatusOr<std::vector<std::string>> GetMany(
      const std::vector<std::string>& keys, absl::Duration timeout);

  // Returns once `count` callers have entered barrier `name`, or
  // DeadlineExceeded saying how many arrived.
  virtual absl::Status Barrier(absl::string_view name, int count,
                               absl::Duration timeout) = 0;
};

// A view of `base` (not owned; must outlive this) with every key prefixed by
// `prefix`, so independent users of one store cannot collide.
class PrefixStore : public Store {
 public:
  PrefixStore(Store* base, std::string prefix)
      : base_(base), prefix_(std::move(prefix)) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override;
  absl::StatusOr<std::vector<std::string>> GetMany(
      const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::Status Barrier(absl::string_view name, int count,
                       absl::Duration timeout) override;

 private:
  Store* base_;
  std::string prefix_;
};

// A view of `base` (not owned; must outlive this) whose calls fail with the
// cancellation's status once `cancel` is cancelled: a Get or GetMany waiting
// when that happens gives up within `poll` (it waits in slices of that
// length).
// Barriers are not sliced: a cancellation stops one only before it starts.
class CancellableStore : public Store {
 public:
  CancellableStore(Store* base, std::shared_ptr<const Cancellation> cancel,
                   absl::Duration poll = absl::Milliseconds(200))
      : base_(base), cancel_(std::move(cancel)), poll_(poll) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override;
  absl::StatusOr<std::vector<std::string>> GetMany(
      const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::Status Barrier(absl::string_view name, int count,
                       absl::Duration timeout) override;

 private:
  Store* base_;
  const std::shared_ptr<const Cancellation> cancel_;
  const absl::Duration poll_;
};

// Ranks `begin` to `end` - 1, without `skip` (-1: none): the peers whose keys
// a rank reads at start-up.
std::vector<int> RankRange(int begin, int end, int skip = -1);

// The values of keys `prefix`+rank for each of `ranks`, in their order, by one
// GetMany: what a rank reads of its peers at start-up.
absl::StatusOr<std::vector<std::string>> GetOfRanks(
    Store& store, absl::string_view prefix, const std::vector<int>& ranks,
    absl::Duration timeout);

// One gather through the store, two round trips whatever `size`: every
// member publishes `mine` under `prefix`+index; member 0 reads them all
// (one GetMany), passes them in order to `combine` and publishes the result
// under `prefix`+"all", which every other member reads. Returns that value
// on every member. A failure names the step and `what` (the records, e.g.
// "every rank's host and transport"); `combine` reports its own errors
// inside the value it returns, so that every member learns of them.
absl::StatusOr<std::string> GatherThroughRoot(
    Store& store, absl::string_view prefix, int index, int size,
    absl::string_view mine, absl::string_view what,
    absl::FunctionRef<std::string(const std::vector<std::string>&)> combine,
    absl::Duration timeout);

// The store of a one-process test, where each thread plays a rank.
std::unique_ptr<Store> NewInMemoryStore();

}  // namespace hvd

#endif  // HVD_CORE_RENDEZVOUS_STORE_H_
