// Looks peers' published records up on a thread of its own, for a
// transport that reaches its peers lazily (TCP's PeerConnector, RDMA's
// engine): a rank reads the records of the peers it talks to only, as it
// first needs each, and a lookup may wait for a peer to publish without
// holding up the transport's own threads.
//
// Peers added while a lookup is under way are looked up together in the
// next, in one call (one GetMany of the store). A call that times out
// while some of its peers have published hands those over and goes on
// with the rest, each call waiting at most kSlice so that Close is never
// held up longer; a peer still missing `timeout` after its batch began
// fails with DeadlineExceeded ("rank R: rank P published no address to
// connect to within T (has its process started?)"). Any other error of a
// lookup fails its peers, annotated "rank R: looking up rank P's address".
#ifndef HVD_CORE_TRANSPORT_LOOKUP_THREAD_H_
#define HVD_CORE_TRANSPORT_LOOKUP_THREAD_H_

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/rendezvous/store.h"

namespace hvd::transport {

template <typename Record>
class LookupThread {
 public:
  // The records of `peers`, in their order, waiting at most `timeout` for
  // them to be published (then DeadlineExceeded).
  using Lookup = std::function<absl::StatusOr<std::vector<Record>>(
      const std::vector<int>& peers, absl::Duration timeout)>;
  // Called on the lookup thread once per added peer, with its record or
  // why there is none.
  using Found = std::function<void(int peer, absl::StatusOr<Record> record)>;

  // How long one lookup call waits before the thread checks for Close.
  static constexpr absl::Duration kSlice = absl::Milliseconds(200);

  // `rank`: this rank, for the messages. The thread starts at the first Add.
  LookupThread(int rank, absl::Duration timeout, Lookup lookup, Found found)
      : rank_(rank),
        timeout_(timeout),
        lookup_(std::move(lookup)),
        found_(std::move(found)) {}
  ~LookupThread() { Close(); }
  LookupThread(const LookupThread&) = delete;
  LookupThread& operator=(const LookupThread&) = delete;

  // Thread-safe. Queues `peer` unless it was added before (each peer is
  // looked up once).
  void Add(int peer) {
    absl::MutexLock lock(&mu_);
    if (stop_ || !added_.insert(peer).second) return;
    queue_.push_back(peer);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }

  // Ends the thread; a lookup under way ends within kSlice. Peers not
  // answered by then get no Found call. Idempotent.
  void Close() {
    std::thread thread;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      thread = std::move(thread_);
    }
    if (thread.joinable()) thread.join();
  }

 private:
  void Loop() {
    while (true) {
      std::vector<int> batch;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_ || !queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (stop_) return;
        batch.assign(queue_.begin(), queue_.end());
        queue_.clear();
      }
      if (!LookUp(std::move(batch))) return;
    }
  }

  // Looks `batch` up until each is found or failed; false when Close came
  // first.
  bool LookUp(std::vector<int> batch) {
    const absl::Time deadline = absl::Now() + timeout_;
    while (!batch.empty()) {
      absl::StatusOr<std::vector<Record>> found =
          lookup_(batch, std::min(kSlice, deadline - absl::Now()));
      if (found.ok() && found->size() != batch.size()) {
        found = absl::InternalError(absl::StrCat("the lookup answered ",
                                                 found->size(), " of ",
                                                 batch.size(), " peers"));
      }
      if (found.ok()) {
        for (size_t i = 0; i < batch.size(); ++i) {
          found_(batch[i], std::move((*found)[i]));
        }
        return true;
      }
      if (!absl::IsDeadlineExceeded(found.status())) {
        for (int peer : batch) found_(peer, Annotated(peer, found.status()));
        return true;
      }
      if (batch.size() > 1) batch = HandOverPublished(std::move(batch));
      if (absl::Now() >= deadline) {
        for (int peer : batch) {
          found_(peer, absl::DeadlineExceededError(absl::StrCat(
                           "rank ", rank_, ": rank ", peer,
                           " published no address to connect to within ",
                           absl::FormatDuration(timeout_),
                           " (has its process started?)")));
        }
        return true;
      }
      absl::MutexLock lock(&mu_);
      if (stop_) return false;
    }
    return true;
  }

  // Some of `batch` have not published yet: hands over those that have
  // (or failed otherwise), returns the rest.
  std::vector<int> HandOverPublished(std::vector<int> batch) {
    std::vector<int> missing;
    for (int peer : batch) {
      absl::StatusOr<std::vector<Record>> one =
          lookup_({peer}, absl::ZeroDuration());
      if (absl::IsDeadlineExceeded(one.status())) {
        missing.push_back(peer);
      } else if (!one.ok()) {
        found_(peer, Annotated(peer, one.status()));
      } else if (one->size() != 1) {
        found_(peer, absl::InternalError("the lookup answered no record"));
      } else {
        found_(peer, std::move(one->front()));
      }
    }
    return missing;
  }

  absl::Status Annotated(int peer, const absl::Status& status) const {
    return absl::Status(status.code(),
                        absl::StrCat("rank ", rank_, ": looking up rank ", peer,
                                     "'s address: ", status.message()));
  }

  const int rank_;
  const absl::Duration timeout_;
  const Lookup lookup_;
  const Found found_;
  absl::Mutex mu_;
  std::deque<int> queue_ ABSL_GUARDED_BY(mu_);
  std::set<int> added_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

// A Lookup of the records each rank published under `prefix` + its rank in
// `store` (kept by the lookup), all of a call's in one GetMany, each made a
// Record by `decode(peer, text)`, whose error fails the call.
template <typename Record>
typename LookupThread<Record>::Lookup StoreRecords(
    std::shared_ptr<Store> store, std::string prefix,
    std::function<absl::StatusOr<Record>(int peer, const std::string& text)>
        decode) {
  return [store = std::move(store), prefix = std::move(prefix),
          decode = std::move(decode)](
             const std::vector<int>& peers,
             absl::Duration timeout) -> absl::StatusOr<std::vector<Record>> {
    absl::StatusOr<std::vector<std::string>> texts =
        GetOfRanks(*store, prefix, peers, timeout);
    if (!texts.ok()) return texts.status();
    std::vector<Record> records;
    records.reserve(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
      absl::StatusOr<Record> record = decode(peers[i], (*texts)[i]);
      if (!record.ok()) return record.status();
      records.push_back(*std::move(record));
    }
    return records;
  };
}

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_LOOKUP_THREAD_H_
