// A worker process for gpu_job_test.cc: `gpu_driver SCENARIO`, started N
// times against a rendezvous server. Uses the C ABI with CUDA tensors
// (kDLCUDA) on GPU 0 (every rank: on one GPU the ranks share it, which is
// what the staged path is for). Prints "rank R: ..." lines; exits 0 when
// every check held.
//
// Scenarios: collectives (every op on GPU tensors), die (rank 1 exits in the
// middle of the job; the others must get an error, not hang), nogpu (on a
// machine without a GPU, a GPU tensor fails at enqueue with a clear error).
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/c_api.h"

namespace {

int g_rank = -1;
int g_failures = 0;

void Fail(const std::string& what) {
  ++g_failures;
  std::printf("rank %d: FAIL %s\n", g_rank, what.c_str());
  std::fflush(stdout);
}

std::string Wait(hvd_handle handle) {
  const int rc = hvd_wait(handle, 120.0);
  if (rc == HVD_TIMEOUT) return "timed out after 120 s";
  return rc == HVD_OK ? "" : hvd_handle_error(handle);
}

// A float32 or int32 tensor in device memory.
struct GpuTensor {
  std::vector<int64_t> shape;
  DLTensor dl{};
  void* data = nullptr;

  GpuTensor(std::vector<int64_t> dims, DLDataType dtype,
            const void* host = nullptr)
      : shape(std::move(dims)) {
    cudaMalloc(&data, std::max<size_t>(Bytes(dtype), 1));
    if (host != nullptr) {
      cudaMemcpy(data, host, Bytes(dtype), cudaMemcpyHostToDevice);
    }
    dl.data = data;
    dl.device = {kDLCUDA, 0};
    dl.ndim = static_cast<int>(shape.size());
    dl.dtype = dtype;
    dl.shape = shape.data();
  }
  ~GpuTensor() { cudaFree(data); }
  size_t Elements() const {
    size_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t Bytes(DLDataType t) const { return Elements() * t.bits / 8; }
};

constexpr DLDataType kF32 = {kDLFloat, 32, 1};
constexpr DLDataType kI32 = {kDLInt, 32, 1};

template <typename T>
std::vector<T> Download(const void* data, size_t count) {
  std::vector<T> out(count);
  cudaMemcpy(out.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost);
  return out;
}

// Takes output 0 of `handle`, checks it is on the GPU, returns its values.
template <typename T>
std::vector<T> TakeGpuOutput(hvd_handle handle, const std::string& what) {
  DLManagedTensor* out = hvd_handle_output(handle, 0);
  if (out == nullptr) {
    Fail(what + ": no output");
    return {};
  }
  if (out->dl_tensor.device.device_type != kDLCUDA) {
    Fail(what + ": output is not on the GPU");
  }
  size_t n = 1;
  for (int i = 0; i < out->dl_tensor.ndim; ++i) n *= out->dl_tensor.shape[i];
  std::vector<T> values = Download<T>(out->dl_tensor.data, n);
  out->deleter(out);
  return values;
}

hvd_options Opts(const char* name, int op = HVD_OP_SUM) {
  hvd_options o = hvd_default_options();
  o.name = name;
  o.op = op;
  return o;
}

// Allreduce, average with a postscale.
void CheckAllreduceAverage(int rank, int size) {
  std::vector<float> host(1000, static_cast<float>(rank + 1));
  GpuTensor t({1000}, kF32, host.data());
  hvd_options o = Opts("ar.avg", HVD_OP_AVERAGE);
  o.postscale_factor = 2.0;
  const std::string e = Wait(hvd_allreduce_async(&t.dl, nullptr, &o));
  if (!e.empty()) Fail("allreduce: " + e);
  const float want = 2.0f * (size + 1) / 2.0f;
  for (float v : Download<float>(t.data, 1000)) {
    if (std::fabs(v - want) > 1e-5f) {
      Fail("allreduce value " + std::to_string(v));
      break;
    }
  }
}

// Grouped allreduce, out of place, int32.
void CheckGroupedAllreduce(int rank, int size) {
  std::vector<int32_t> host = {rank, 1, 2 * rank};
  GpuTensor a({3}, kI32, host.data()), b({1}, kI32, host.data());
  GpuTensor oa({3}, kI32), ob({1}, kI32);
  DLTensor* ins[] = {&a.dl, &b.dl};
  DLTensor* outs[] = {&oa.dl, &ob.dl};
  hvd_options o = Opts("grouped");
  const std::string e = Wait(hvd_grouped_allreduce_async(2, ins, outs, &o));
  if (!e.empty()) Fail("grouped allreduce: " + e);
  const int32_t sum = size * (size - 1) / 2;
  const auto got = Download<int32_t>(oa.data, 3);
  if (got != std::vector<int32_t>{sum, size, 2 * sum}) {
    Fail("grouped allreduce values");
  }
}

// Allgather of differing first dimensions.
void CheckAllgather(int rank, int size) {
  std::vector<float> host(rank + 1, static_cast<float>(rank));
  GpuTensor t({rank + 1}, kF32, host.data());
  hvd_options o = Opts("gather");
  const hvd_handle h = hvd_allgather_async(&t.dl, &o);
  const std::string e = Wait(h);
  if (!e.empty()) Fail("allgather: " + e);
  std::vector<float> want;
  for (int r = 0; r < size; ++r) want.insert(want.end(), r + 1, r);
  if (e.empty() && TakeGpuOutput<float>(h, "allgather") != want) {
    Fail("allgather values");
  }
  hvd_release(h);
}

// Broadcast from the last rank.
void CheckBroadcast(int rank, int size) {
  std::vector<int32_t> host = {rank, rank};
  GpuTensor t({2}, kI32, host.data());
  hvd_options o = Opts("bcast");
  o.root_rank = size - 1;
  const std::string e = Wait(hvd_broadcast_async(&t.dl, nullptr, &o));
  if (!e.empty()) Fail("broadcast: " + e);
  if (Download<int32_t>(t.data, 2) !=
      std::vector<int32_t>{size - 1, size - 1}) {
    Fail("broadcast values");
  }
}

// Alltoall: one row to each rank, valued 100 * sender + receiver.
void CheckAlltoall(int rank, int size) {
  std::vector<int32_t> host;
  for (int j = 0; j < size; ++j) host.push_back(100 * rank + j);
  GpuTensor t({size}, kI32, host.data());
  hvd_options o = Opts("a2a");
  const hvd_handle h = hvd_alltoall_async(&t.dl, &o);
  const std::string e = Wait(h);
  if (!e.empty()) Fail("alltoall: " + e);
  std::vector<int32_t> want;
  for (int j = 0; j < size; ++j) want.push_back(100 * j + rank);
  if (e.empty() && TakeGpuOutput<int32_t>(h, "alltoall") != want) {
    Fail("alltoall values");
  }
  hvd_release(h);
}

// Reducescatter of one row per rank.
void CheckReducescatter(int rank, int size) {
  std::vector<float> host(size * 4, static_cast<float>(rank));
  GpuTensor t({size, 4}, kF32, host.data());
  hvd_options o = Opts("rs");
  const hvd_handle h = hvd_reducescatter_async(&t.dl, &o);
  const std::string e = Wait(h);
  if (!e.empty()) Fail("reducescatter: " + e);
  const float sum = size * (size - 1) / 2.0f;
  if (e.empty() &&
      TakeGpuOutput<float>(h, "reducescatter") != std::vector<float>(4, sum)) {
    Fail("reducescatter values");
  }
  hvd_release(h);
}

void Collectives(int rank, int size) {
  CheckAllreduceAverage(rank, size);
  CheckGroupedAllreduce(rank, size);
  CheckAllgather(rank, size);
  CheckBroadcast(rank, size);
  CheckAlltoall(rank, size);
  CheckReducescatter(rank, size);
}

void Die(int rank) {
  std::vector<float> host(64, 1.0f);
  GpuTensor t({64}, kF32, host.data());
  hvd_options o = Opts("before");
  const std::string e = Wait(hvd_allreduce_async(&t.dl, nullptr, &o));
  if (!e.empty()) Fail("first allreduce: " + e);
  if (rank == 1) {
    std::printf("rank 1: exiting mid-job\n");
    std::fflush(stdout);
    _exit(3);
  }
  hvd_options o2 = Opts("after");
  const std::string lost = Wait(hvd_allreduce_async(&t.dl, nullptr, &o2));
  if (lost.empty()) {
    Fail("the allreduce after rank 1 died succeeded");
  } else if (lost.find("timed out after 120 s") != std::string::npos) {
    Fail("hung instead of failing: " + lost);
  } else {
    std::printf("rank %d: error as expected: %s\n", rank, lost.c_str());
  }
}

void NoGpu() {
  // A device pointer that never existed: the enqueue must fail cleanly.
  float fake = 0;
  int64_t shape[] = {1};
  DLTensor t{};
  t.data = &fake;
  t.device = {kDLCUDA, 0};
  t.ndim = 1;
  t.dtype = kF32;
  t.shape = shape;
  hvd_options o = Opts("nogpu");
  const std::string e = Wait(hvd_allreduce_async(&t, nullptr, &o));
  if (e.find("GPU 0 is not usable") == std::string::npos) {
    Fail("expected 'GPU 0 is not usable', got '" + e + "'");
  } else {
    std::printf("rank %d: refused: %s\n", g_rank, e.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "collectives";
  if (hvd_init() != HVD_OK) {
    std::printf("rank ?: FAIL init: %s\n", hvd_last_error());
    return 1;
  }
  g_rank = hvd_rank();
  const int size = hvd_size();
  if (scenario != "nogpu") cudaSetDevice(0);
  if (scenario == "collectives") {
    Collectives(g_rank, size);
  } else if (scenario == "die") {
    Die(g_rank);
  } else if (scenario == "nogpu") {
    NoGpu();
  } else {
    Fail("unknown scenario " + scenario);
  }
  hvd_shutdown();
  if (g_failures == 0) std::printf("rank %d: PASS\n", g_rank);
  std::fflush(stdout);
  return g_failures == 0 ? 0 : 1;
}
