// A job of runtimes in one process, for tests: one Runtime per rank over
// real transports connected through an in-memory store (gloo's
// one-thread-per-rank pattern), and the entries tests submit.
#ifndef HVD_CORE_RUNTIME_TEST_JOB_H_
#define HVD_CORE_RUNTIME_TEST_JOB_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/collectives/test_mesh.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/runtime.h"
#include "core/transport/forwarding_context.h"
#include "gtest/gtest.h"

namespace hvd::runtime {

using collectives::MeshTransport;
using transport::ForwardingContext;

// Wraps a rank's data plane before its runtime gets it.
using WrapContext = std::function<std::unique_ptr<transport::Context>(
    int rank, std::unique_ptr<transport::Context>)>;

// A job of `size` runtimes in this process.
class Job {
 public:
  Job(int size, MeshTransport transport, Config base = {},
      const WrapContext& wrap = nullptr) {
    auto mesh = collectives::TestMesh::Create(size, transport);
    EXPECT_TRUE(mesh.ok()) << mesh.status();
    if (!mesh.ok()) return;
    for (int rank = 0; rank < size; ++rank) {
      Config config = base;
      config.rank = rank;
      config.size = size;
      config.hostname = absl::StrCat("host", (*mesh)->hosts()[rank]);
      config.timeout = absl::Seconds(20);
      RuntimeParts parts;
      parts.context = (*mesh)->TakeContext(rank);
      if (wrap) parts.context = wrap(rank, std::move(parts.context));
      parts.hosts = (*mesh)->hosts();
      handles_.push_back(std::make_unique<HandleTable>());
      auto runtime =
          Runtime::Start(config, std::move(parts), handles_.back().get());
      EXPECT_TRUE(runtime.ok()) << runtime.status();
      if (runtime.ok()) runtimes_.push_back(*std::move(runtime));
    }
    mesh_ = *std::move(mesh);
  }
  ~Job() {
    // Every rank asks to stop at once: the stop is negotiated.
    RunOnEveryRank([this](int rank) { runtimes_[rank]->Shutdown(); });
  }

  int size() const { return static_cast<int>(runtimes_.size()); }
  Runtime& runtime(int rank) { return *runtimes_[rank]; }
  HandleTable& handles(int rank) { return *handles_[rank]; }

  void RunOnEveryRank(const std::function<void(int rank)>& fn) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < size(); ++rank) threads.emplace_back(fn, rank);
    for (auto& t : threads) t.join();
  }

  // Submits `entries` on `rank` and waits for the handle's status, running
  // the cycles itself as the C ABI's hvd_wait does.
  absl::Status Run(int rank,
                   std::vector<std::unique_ptr<TensorEntry>> entries) {
    return Wait(rank, runtime(rank).Submit(std::move(entries)).value());
  }

  // Waits for `handle` of `rank` as Run does, and releases it.
  absl::Status Wait(int rank, int64_t handle) {
    runtime(rank).Drive(handle, absl::Now() + absl::Seconds(30));
    return Await(rank, handle);
  }

  // The same without running any cycle: the background thread's to run.
  absl::Status Await(int rank, int64_t handle) {
    if (handles(rank).Wait(handle, absl::Now() + absl::Seconds(30)) !=
        HandleTable::kDone) {
      return absl::DeadlineExceededError("handle did not complete");
    }
    absl::Status status = handles(rank).GetStatus(handle);
    handles(rank).Release(handle);
    return status;
  }

 private:
  std::unique_ptr<collectives::TestMesh> mesh_;
  std::vector<std::unique_ptr<HandleTable>> handles_;
  std::vector<std::unique_ptr<Runtime>> runtimes_;
};

// Rank r contributes r + 1 to every element, so the sum is n(n+1)/2.
inline float SumOfRanks(int size) { return size * (size + 1) / 2.0f; }

// An in-place float32 allreduce (Sum) of `data`.
inline std::unique_ptr<TensorEntry> Allreduce(const std::string& name,
                                       std::vector<float>& data) {
  auto entry = std::make_unique<TensorEntry>();
  Request& r = entry->request;
  r.set_type(ALLREDUCE);
  r.set_name(name);
  r.set_dtype(static_cast<int32_t>(DataType::kFloat32));
  r.add_shape(static_cast<int64_t>(data.size()));
  r.set_op(static_cast<int32_t>(ReduceOp::kSum));
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  entry->input = entry->output = data.data();
  return entry;
}

inline std::vector<std::unique_ptr<TensorEntry>> One(
    std::unique_ptr<TensorEntry> entry) {
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(std::move(entry));
  return entries;
}

// Submits on `rank`, without waiting, an allreduce of each of `data`'s
// buffers, named "g0", "g1", ..., `gap` apart (as a framework submits a
// step's gradients); returns their handles.
inline std::vector<int64_t> SubmitEach(
    Job& job, int rank, std::vector<std::vector<float>>& data,
    absl::Duration gap = absl::ZeroDuration()) {
  std::vector<int64_t> handles;
  for (size_t t = 0; t < data.size(); ++t) {
    if (t > 0) absl::SleepFor(gap);
    handles.push_back(job.runtime(rank)
                          .Submit(One(Allreduce(absl::StrCat("g", t), data[t])))
                          .value());
  }
  return handles;
}

inline std::unique_ptr<TensorEntry> Join() {
  auto entry = std::make_unique<TensorEntry>();
  entry->request.set_type(JOIN);
  entry->request.set_name("join");
  return entry;
}

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_TEST_JOB_H_
