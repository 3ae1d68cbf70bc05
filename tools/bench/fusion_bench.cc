// Fusion benchmark: a training step's gradient allreduces against one
// allreduce of a single tensor of the same total size, through the C ABI:
//
//   hvdrun -np 2 bazel-bin/tools/bench/fusion_bench
//       [--shapes tools/bench/resnet50_shapes.txt] [--steps 15] [--warmup 3]
//       [--op avg|sum] [--submit-gap-us 0] [--memory shared|separate]
//       [--layout parameter|backward]
//
// A step submits one allreduce per tensor (ResNet-50's 161 parameter shapes,
// 25.6 M float32) in reverse parameter order, as backpropagation produces
// the gradients, all asynchronously, then waits for every handle -- what
// hvd.torch.DistributedOptimizer does. The flat reference allreduces one
// tensor of the same element count. Steps and flat calls alternate; rank 0
// prints the median and minimum of each and the ratio step/flat. Run it once
// with the default fusion threshold and once with HVD_FUSION_THRESHOLD=0
// (fusion off). Results are checked once at the end (sum of ranks).
// --submit-gap-us N spins N microseconds between a step's submissions, as
// a binding's own work per call spaces them (hvd.torch: about 6 us here),
// so that the cost of gradients arriving over time shows apart from it.
// --memory: whether the step and the flat tensor move the same pages
// (shared, the default) or each gradient has an allocation of its own
// (separate); see Memory. --layout (shared memory): the gradients laid out
// in parameter order (the default), which the step, submitting in backward
// order, walks from the top down, or in backward order, which it walks
// upward as the flat reference does.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/c_api.h"
#include "tools/bench/median.h"
#include "tools/bench/shapes_file.h"

namespace {

using Clock = std::chrono::steady_clock;

// One tensor as the C ABI takes it, over memory it does not own.
struct Tensor {
  std::vector<int64_t> shape;
  size_t count = 1;
  float* data = nullptr;
  DLTensor t{};
  std::string name;

  Tensor(std::vector<int64_t> dims, std::string n)
      : shape(std::move(dims)), name(std::move(n)) {
    for (int64_t d : shape) count *= static_cast<size_t>(d);
  }
  void Bind(float* memory) {
    data = memory;
    std::fill(data, data + count, 1.0f);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape.data();
  }
};

// Where the gradients and the flat tensor live. "shared": the gradients are
// carved from one allocation, each starting 64-byte aligned as torch's CPU
// allocator places them, and the flat tensor is that allocation's first
// bytes, so the step and its reference move the same pages. "separate": an
// allocation per gradient and one for the flat tensor, as torch allocates
// them; on a VM two allocations of the same size can differ in speed by
// several percent, which then shows in the ratio. Shared, the gradients lie
// in the order of `layout` (indices into `grads`).
class Memory {
 public:
  Memory(bool shared, std::vector<Tensor>& grads,
         const std::vector<size_t>& layout, Tensor& flat) {
    if (!shared) {
      for (Tensor& g : grads) g.Bind(Own(g.count));
      flat.Bind(Own(flat.count));
      return;
    }
    // Each gradient's room: its elements, up to the next 64 bytes. Their
    // sum is at least the flat tensor's count.
    auto room = [](const Tensor& g) {
      constexpr size_t kAlign = 64 / sizeof(float);
      return (g.count + kAlign - 1) / kAlign * kAlign;
    };
    size_t padded = 0;
    for (const Tensor& g : grads) padded += room(g);
    float* base = Own(padded);
    size_t at = 0;
    for (size_t i : layout) {
      grads[i].Bind(base + at);
      at += room(grads[i]);
    }
    flat.Bind(base);
  }

 private:
  float* Own(size_t count) {
    blocks_.emplace_back(count + 64 / sizeof(float));
    float* p = blocks_.back().data();
    while (reinterpret_cast<uintptr_t>(p) % 64 != 0) ++p;
    return p;
  }
  std::vector<std::vector<float>> blocks_;
};

using ::hvd::bench::Median;

// Submits every tensor (in `order`), `gap_us` apart, and waits for all;
// false on error.
bool Allreduce(std::vector<Tensor>& tensors, const std::vector<size_t>& order,
               int op, int gap_us = 0) {
  std::vector<hvd_handle> handles;
  handles.reserve(order.size());
  for (size_t i : order) {
    if (gap_us > 0 && !handles.empty()) {
      const auto until = Clock::now() + std::chrono::microseconds(gap_us);
      while (Clock::now() < until) {
      }
    }
    hvd_options options = hvd_default_options();
    options.name = tensors[i].name.c_str();
    options.op = op;
    handles.push_back(hvd_allreduce_async(&tensors[i].t, nullptr, &options));
  }
  bool ok = true;
  for (hvd_handle h : handles) {
    if (hvd_wait(h, 600) != HVD_OK) {
      std::fprintf(stderr, "allreduce failed: %s\n", hvd_handle_error(h));
      ok = false;
    }
    hvd_release(h);
  }
  return ok;
}

struct BenchFlags {
  std::string shapes_path = "tools/bench/resnet50_shapes.txt";
  int steps = 15;
  int warmup = 3;
  std::string op_name = "avg";
  int submit_gap_us = 0;
  bool shared_memory = true;
  bool backward_layout = false;
};

// Whether `value` of `flag` is `first` (*second_chosen false) or `second`
// (true); false, with a one-line error, if neither.
bool Either(const std::string& flag, const std::string& value,
            const char* first, const char* second, bool* second_chosen) {
  if (value != first && value != second) {
    std::fprintf(stderr, "fusion_bench: %s is %s or %s, not %s\n", flag.c_str(),
                 first, second, value.c_str());
    return false;
  }
  *second_chosen = value == second;
  return true;
}

bool ParseFlags(int argc, char** argv, BenchFlags* f) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--shapes") {
      f->shapes_path = argv[i + 1];
    } else if (a == "--steps") {
      f->steps = std::atoi(argv[i + 1]);
    } else if (a == "--warmup") {
      f->warmup = std::atoi(argv[i + 1]);
    } else if (a == "--op") {
      f->op_name = argv[i + 1];
    } else if (a == "--submit-gap-us") {
      f->submit_gap_us = std::atoi(argv[i + 1]);
    } else if (a == "--memory") {
      bool separate;
      if (!Either(a, argv[i + 1], "shared", "separate", &separate)) {
        return false;
      }
      f->shared_memory = !separate;
    } else if (a == "--layout") {
      if (!Either(a, argv[i + 1], "parameter", "backward",
                  &f->backward_layout)) {
        return false;
      }
    } else {
      std::fprintf(stderr, "fusion_bench: unknown flag %s\n", a.c_str());
      return false;
    }
  }
  if (f->backward_layout && !f->shared_memory) {
    std::fprintf(stderr,
                 "fusion_bench: --layout orders the shared memory; drop it "
                 "or --memory separate\n");
    return false;
  }
  return true;
}

// One gradient per shape in `path` (shapes_file.h), all ones; false if the
// file cannot be read.
bool ReadGradients(const std::string& path, std::vector<Tensor>* grads) {
  std::vector<std::vector<int64_t>> shapes;
  if (!hvd::bench::ReadShapes(path, &shapes)) return false;
  for (std::vector<int64_t>& dims : shapes) {
    grads->emplace_back(std::move(dims),
                        "grad." + std::to_string(grads->size()));
  }
  return true;
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Every rank contributes rank+1: after a sum each element is size(size+1)/2.
// Returns the wrong elements on this rank, or -1 when the allreduce failed.
long CheckSum(std::vector<Tensor>& grads, const std::vector<size_t>& order,
              int rank, int size) {
  for (Tensor& g : grads) std::fill(g.data, g.data + g.count, rank + 1.0f);
  if (!Allreduce(grads, order, HVD_OP_SUM)) return -1;
  const float want = size * (size + 1) / 2.0f;
  long wrong = 0;
  for (const Tensor& g : grads) {
    wrong += std::count_if(g.data, g.data + g.count,
                           [&](float v) { return v != want; });
  }
  return wrong;
}

void PrintResult(const std::vector<double>& step_ms,
                 const std::vector<double>& flat_ms, long wrong) {
  const double s = Median(step_ms), f = Median(flat_ms);
  std::printf("step  median %.2f ms  min %.2f ms\n", s,
              *std::min_element(step_ms.begin(), step_ms.end()));
  std::printf("flat  median %.2f ms  min %.2f ms\n", f,
              *std::min_element(flat_ms.begin(), flat_ms.end()));
  std::printf("ratio step/flat %.3f  (wrong elements on rank 0: %ld)\n", s / f,
              wrong);
  // Each step beside the flat call after it: a drift of the machine's pace
  // within the run moves both.
  std::vector<double> pairs;
  for (size_t i = 0; i < step_ms.size(); ++i) {
    pairs.push_back(step_ms[i] / flat_ms[i]);
  }
  std::printf("pairs step/flat median %.3f\n", Median(pairs));
}

}  // namespace

int main(int argc, char** argv) {
  BenchFlags flags;
  std::vector<Tensor> grads;
  if (!ParseFlags(argc, argv, &flags) ||
      !ReadGradients(flags.shapes_path, &grads)) {
    return 2;
  }
  const int op = flags.op_name == "sum" ? HVD_OP_SUM : HVD_OP_AVERAGE;
  size_t total = 0;
  for (const Tensor& g : grads) total += g.count;
  if (hvd_init() != HVD_OK) {
    std::fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  const int rank = hvd_rank(), size = hvd_size();
  std::vector<Tensor> flat;
  flat.emplace_back(std::vector<int64_t>{static_cast<int64_t>(total)}, "flat");
  std::vector<size_t> backward(grads.size()), forward(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    backward[i] = grads.size() - 1 - i;
    forward[i] = i;
  }
  Memory memory(flags.shared_memory, grads,
                flags.backward_layout ? backward : forward, flat[0]);
  const std::vector<size_t> one = {0};
  const char* fusion = std::getenv("HVD_FUSION_THRESHOLD");
  if (rank == 0) {
    std::printf(
        "# fusion_bench: %d ranks, %zu tensors, %zu float32 (%.1f MB), "
        "op %s, HVD_FUSION_THRESHOLD=%s, %d steps, %d us between "
        "submissions, memory %s%s\n",
        size, grads.size(), total, total * 4 / 1e6, flags.op_name.c_str(),
        fusion ? fusion : "(default)", flags.steps, flags.submit_gap_us,
        flags.shared_memory ? "shared" : "separate",
        !flags.shared_memory    ? ""
        : flags.backward_layout ? " in backward order"
                                : " in parameter order");
  }
  std::vector<double> step_ms, flat_ms;
  bool ok = true;
  for (int i = 0; i < flags.warmup + flags.steps && ok; ++i) {
    auto t0 = Clock::now();
    ok = Allreduce(grads, backward, op, flags.submit_gap_us);
    auto t1 = Clock::now();
    ok = ok && Allreduce(flat, one, op);
    auto t2 = Clock::now();
    if (i >= flags.warmup) {
      step_ms.push_back(Ms(t1 - t0));
      flat_ms.push_back(Ms(t2 - t1));
    }
  }
  const long wrong = ok ? CheckSum(grads, backward, rank, size) : -1;
  if (wrong >= 0 && rank == 0) PrintResult(step_ms, flat_ms, wrong);
  hvd_shutdown();
  return wrong == 0 ? 0 : 1;
}
