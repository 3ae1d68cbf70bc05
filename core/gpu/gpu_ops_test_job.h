// Test support for the GPU backend's tests: a job of several GpuOps in one
// process over host platforms (one per rank; their "device" memory is host
// memory), meeting through an in-memory store and connected by the real TCP
// transport, and the responses and checks the tests share.
#ifndef HVD_CORE_GPU_GPU_OPS_TEST_JOB_H_
#define HVD_CORE_GPU_GPU_OPS_TEST_JOB_H_

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/gpu/gpu_ops.h"
#include "core/gpu/host_platform.h"
#include "core/transport/tcp/tcp_context.h"

namespace hvd::gpu::testjob {

using runtime::OpResult;
using runtime::Response;
using runtime::TensorEntry;

// What one entry ended with.
struct Outcome {
  bool done = false;
  absl::Status status;
  OpResult result;
};

struct RankSetup {
  std::string host = "host";
  std::string gpu = "GPU-shared";
};

struct Options {
  std::vector<RankSetup> ranks;
  GpuOptions gpu;
  bool nccl = true;
  absl::Duration timeout = absl::Seconds(20);
};

// One test job: N backends over host platforms.
class Job {
 public:
  explicit Job(const Options& options) : store_(NewInMemoryStore()) {
    const int n = static_cast<int>(options.ranks.size());
    for (int r = 0; r < n; ++r) {
      transport::TcpOptions tcp;
      tcp.iface = "127.0.0.1";
      tcp.hostname = options.ranks[r].host;
      tcp.token = "gpu-ops-test-token";
      auto make_context = [tcp](int rank, int size,
                                std::shared_ptr<Store> store) {
        return transport::CreateTcpContext(rank, size, std::move(store), tcp);
      };
      runtime::DeviceEnv env;
      env.config.rank = r;
      env.config.size = n;
      env.config.hostname = options.ranks[r].host;
      env.config.timeout = options.timeout;
      env.store = store_.get();
      env.make_context = make_context;
      env.collective_options.timeout = options.timeout;
      HostPlatformOptions host;
      host.identity = options.ranks[r].gpu;
      host.nccl = options.nccl;
      host.store = store_.get();
      host.make_context = make_context;
      host.collective_options.timeout = options.timeout;
      host.device_count = 2;
      auto platform = std::make_unique<HostPlatform>(host);
      platforms_.push_back(platform.get());
      ops_.push_back(
          std::make_unique<GpuOps>(env, std::move(platform), options.gpu));
    }
  }

  int size() const { return static_cast<int>(ops_.size()); }
  GpuOps& ops(int rank) { return *ops_[rank]; }
  HostDevice* device(int rank) { return platforms_[rank]->host_device(0); }

  // An entry of rank `rank` over host memory `input`/`output`.
  std::unique_ptr<TensorEntry> Entry(int rank, const std::string& name,
                                     DataType dtype, std::vector<int64_t> shape,
                                     void* input, void* output,
                                     int device_id = 0) {
    auto entry = std::make_unique<TensorEntry>();
    entry->request.set_name(name);
    entry->request.set_dtype(static_cast<int32_t>(dtype));
    for (int64_t d : shape) entry->request.add_shape(d);
    entry->request.set_rank(rank);
    entry->input = input;
    entry->output = output;
    entry->device = DeviceType::kGpu;
    entry->device_id = device_id;
    entry->ready = *ops_[rank]->MarkReady(device_id, nullptr);
    const std::string key = absl::StrCat(rank, "/", name);
    entry->done = [this, key](const absl::Status& s, OpResult r) {
      absl::MutexLock lock(&mu_);
      Outcome& o = outcomes_[key];
      o.done = true;
      o.status = s;
      o.result = std::move(r);
    };
    return entry;
  }

  // Waits for rank `rank`'s entry `name`.
  Outcome Wait(int rank, const std::string& name,
               absl::Duration timeout = absl::Seconds(30)) {
    const std::string key = absl::StrCat(rank, "/", name);
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return outcomes_[key].done;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      Outcome o;
      o.status = absl::DeadlineExceededError("test: no completion");
      return o;
    }
    return outcomes_[key];
  }

  absl::Status Execute(int rank, const Response& response,
                       std::vector<std::unique_ptr<TensorEntry>> entries,
                       std::vector<int> members = {}) {
    collectives::Group group;
    if (members.empty()) {
      for (int r = 0; r < size(); ++r) members.push_back(r);
    }
    group.ranks = members;
    group.index = static_cast<int>(
        std::find(members.begin(), members.end(), rank) - members.begin());
    return ops_[rank]->Execute(response, entries, group);
  }

 private:
  std::unique_ptr<Store> store_;
  absl::Mutex mu_;
  std::map<std::string, Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
  std::vector<HostPlatform*> platforms_;
  // Last: the backends complete entries (into outcomes_) until they go.
  std::vector<std::unique_ptr<GpuOps>> ops_;
};

// Every rank on one host and one GPU (the staged path).
Options Shared(int n);
// Every rank on one host, each with its own GPU.
Options Distinct(int n);

Response AllreduceResponse(const std::vector<std::string>& names,
                           const std::vector<int64_t>& counts, DataType dtype,
                           ReduceOp op, double pre = 1.0, double post = 1.0,
                           int set = 0);

// A response of one data-movement tensor (allgather, broadcast, alltoall,
// reducescatter) of `sizes` rows of `row_elems` elements.
Response DataResponse(runtime::OpType type, const std::string& name,
                      DataType dtype, std::vector<int64_t> sizes,
                      int64_t row_elems);

// Runs a fused float32 allreduce of tensors of `counts` elements on every
// rank (rank r's element i is r + 1 + i) and returns rank 0's results.
std::vector<std::vector<float>> RunAllreduce(Job& job,
                                             const std::vector<int64_t>& counts,
                                             ReduceOp op, double pre = 1.0,
                                             double post = 1.0,
                                             const std::string& tag = "t");

// Expects RunAllreduce's results for a job of n ranks.
void ExpectReduced(const std::vector<std::vector<float>>& got,
                   const std::vector<int64_t>& counts, int n, ReduceOp op,
                   double pre = 1.0, double post = 1.0);

}  // namespace hvd::gpu::testjob

#endif  // HVD_CORE_GPU_GPU_OPS_TEST_JOB_H_
