// What hvd's NCCL path costs over calling NCCL directly, and what the staged
// path moves. Needs a GPU (docs/gpu.md, "Measuring"); gpu_overhead.sh runs
// both modes.
//
//   gpu_overhead_bench --mode=nccl     one process: the same float32 sum
//       allreduce of 1 KiB, 1 MiB and 256 MiB through ncclAllReduce on a
//       communicator of one rank, then through hvd_allreduce_async (C ABI,
//       producer stream passed, waited for with hvd_wait). Median per op.
//   gpu_overhead_bench --mode=resnet --shapes=FILE   one process: the
//       161 gradients of FILE (resnet50_shapes.txt) submitted one call each
//       and then waited for, as hvd.DistributedOptimizer does, against one
//       flat tensor of their total size; medians of the submitting, the
//       waiting and the whole step.
//   hvdrun -np N gpu_overhead_bench --mode=staged   N processes sharing
//       GPU 0: hvd allreduce through the staged path; median time and
//       bus bandwidth (2 (N-1)/N x bytes / time).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/c_api.h"
#include "tools/bench/shapes_file.h"
#include "tools/bench/median.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSizes[] = {size_t{1} << 10, size_t{1} << 20,
                             size_t{256} << 20};

int Iterations(size_t bytes) { return bytes >= (size_t{64} << 20) ? 20 : 200; }

using ::hvd::bench::Median;

#define CHECK_CUDA(x)                                              \
  do {                                                             \
    cudaError_t e = (x);                                           \
    if (e != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(2);                                                \
    }                                                              \
  } while (0)

// Median microseconds of ncclAllReduce + stream synchronize.
double Direct(void* data, size_t bytes, cudaStream_t stream) {
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitRank failed\n");
    std::exit(2);
  }
  std::vector<double> times;
  for (int i = -5; i < Iterations(bytes); ++i) {
    const auto start = Clock::now();
    ncclAllReduce(data, data, bytes / 4, ncclFloat32, ncclSum, comm, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= 0) times.push_back(us);
  }
  ncclCommDestroy(comm);
  return Median(times);
}

DLTensor Float32(void* data, int64_t* count) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCUDA, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = count;
  return t;
}

// Median microseconds of hvd_allreduce_async + hvd_wait on a GPU tensor.
double ThroughHvd(void* data, size_t bytes, cudaStream_t stream,
                  const char* tag) {
  int64_t shape[] = {static_cast<int64_t>(bytes / 4)};
  DLTensor t = Float32(data, shape);
  hvd_options o = hvd_default_options();
  const std::string name =
      std::string("bench.") + tag + "." + std::to_string(bytes);
  o.name =
      name.c_str();  // one name: the response cache applies, as in training
  o.stream = stream;
  std::vector<double> times;
  for (int i = -5; i < Iterations(bytes); ++i) {
    const auto start = Clock::now();
    const hvd_handle h = hvd_allreduce_async(&t, nullptr, &o);
    if (hvd_wait(h, 300.0) != HVD_OK) {
      std::fprintf(stderr, "hvd allreduce failed: %s\n", hvd_handle_error(h));
      std::exit(2);
    }
    hvd_release(h);
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= 0) times.push_back(us);
  }
  return Median(times);
}

// Element counts of the shapes in `path` (shapes_file.h); empty when it
// cannot be read.
std::vector<int64_t> Counts(const std::string& path) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> counts;
  if (!hvd::bench::ReadShapes(path, &shapes)) return counts;
  for (const std::vector<int64_t>& dims : shapes) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    counts.push_back(n);
  }
  return counts;
}

// The optimizer's pattern through the C ABI: every gradient submitted, then
// every handle waited for. Prints the medians.
void ManyTensors(char* data, const std::vector<int64_t>& counts,
                 cudaStream_t stream) {
  hvd_options o = hvd_default_options();
  o.stream = stream;
  std::vector<int64_t> shapes = counts;
  std::vector<DLTensor> tensors;
  std::vector<std::string> names;
  int64_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    tensors.push_back(Float32(data + total * 4, &shapes[i]));
    names.push_back("grad." + std::to_string(i));
    total += counts[i];
  }
  std::vector<double> submit, wait, step;
  std::vector<hvd_handle> handles(counts.size());
  for (int i = -5; i < 50; ++i) {
    const auto start = Clock::now();
    for (size_t t = 0; t < tensors.size(); ++t) {
      o.name = names[t].c_str();
      handles[t] = hvd_allreduce_async(&tensors[t], nullptr, &o);
    }
    const auto submitted = Clock::now();
    for (hvd_handle h : handles) {
      if (hvd_wait(h, 300.0) != HVD_OK) {
        std::fprintf(stderr, "hvd allreduce failed: %s\n", hvd_handle_error(h));
        std::exit(2);
      }
      hvd_release(h);
    }
    const auto end = Clock::now();
    if (i < 0) continue;
    submit.push_back(
        std::chrono::duration<double, std::micro>(submitted - start).count());
    wait.push_back(
        std::chrono::duration<double, std::micro>(end - submitted).count());
    step.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  std::printf("%zu tensors: submit %.1f us, wait %.1f us, step %.1f us\n",
              counts.size(), Median(submit), Median(wait), Median(step));
}

std::string Human(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "nccl", shapes;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mode=", 7) == 0) mode = argv[i] + 7;
    if (std::strncmp(argv[i], "--shapes=", 9) == 0) shapes = argv[i] + 9;
  }
  if (mode == "staged") setenv("HVD_GPU_DATA_PATH", "staged", 1);
  CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* data = nullptr;
  CHECK_CUDA(cudaMalloc(&data, kSizes[2]));
  CHECK_CUDA(cudaMemset(data, 0, kSizes[2]));
  if (hvd_init() != HVD_OK) {
    std::fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 2;
  }
  const int rank = hvd_rank(), size = hvd_size();
  if (mode == "nccl") {
    if (size != 1) {
      std::fprintf(stderr, "--mode=nccl runs as one process\n");
      return 2;
    }
    std::printf("size      direct NCCL (us)  hvd NCCL (us)  overhead (us)\n");
    for (size_t bytes : kSizes) {
      const double direct = Direct(data, bytes, stream);
      const double hvd = ThroughHvd(data, bytes, stream, "nccl");
      std::printf("%-9s %16.1f %14.1f %14.1f\n", Human(bytes).c_str(), direct,
                  hvd, hvd - direct);
    }
  } else if (mode == "resnet" && size == 1) {
    const std::vector<int64_t> counts = Counts(shapes);
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    if (counts.empty() || total * 4 > static_cast<int64_t>(kSizes[2])) {
      std::fprintf(stderr, "--mode=resnet needs --shapes=FILE of at most "
                   "64 Mi floats in all\n");
      return 2;
    }
    ManyTensors(static_cast<char*>(data), counts, stream);
    const double flat =
        ThroughHvd(data, static_cast<size_t>(total) * 4, stream, "flat");
    std::printf("one flat tensor of %lld floats: %.1f us\n",
                static_cast<long long>(total), flat);
  } else if (mode == "staged") {
    if (rank == 0) {
      std::printf("staged path, %d processes sharing GPU 0\n", size);
      std::printf("size      time (us)  bus bandwidth (GB/s)\n");
    }
    for (size_t bytes : kSizes) {
      const double us = ThroughHvd(data, bytes, stream, "staged");
      const double busbw = 2.0 * (size - 1) / size * bytes / (us * 1e3);
      if (rank == 0) {
        std::printf("%-9s %10.1f %21.2f\n", Human(bytes).c_str(), us, busbw);
      }
    }
  } else {
    std::fprintf(stderr, "--mode=nccl, resnet (one process) or staged\n");
    return 2;
  }
  std::fflush(stdout);
  hvd_shutdown();
  cudaFree(data);
  return 0;
}
