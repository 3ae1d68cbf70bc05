// nccl-tests-style sweep of hvd's collectives through the C ABI, one process
// per rank under hvdrun:
//
//   hvdrun -np 2 bazel-bin/tools/bench/hvd_bench [flags]
//     --ops allreduce,allgather,broadcast,alltoall,reducescatter (allreduce)
//     -b BYTES  first size (8)         -e BYTES  last size (256M)
//     -f N      size factor (2)        -d TYPE   float32 float64 float16
//                                                bfloat16 int32 int64 uint8
//     -o OP     sum avg min max prod   -n N      timed iterations (50)
//     -w N      warm-up iterations (5) -c 0|1    check results (1)
//     --budget BYTES  fewer iterations for big sizes: at most BUDGET/size,
//                     at least 3 (2G)
//     --csv PATH      rank 0 also writes one CSV row per op and size
//
// Sizes are nccl-tests' "size": the buffer of allreduce and broadcast, the
// whole output of allgather, the whole input of reducescatter and alltoall
// (per rank). Each iteration is one call end to end -- submit, negotiation
// with rank 0, data, completion, hvd_wait -- timed on every rank; rank 0
// prints the median and minimum of its own times, algbw = size / median and
// busbw = algbw * factor (allreduce 2(n-1)/n; allgather, reducescatter and
// alltoall (n-1)/n; broadcast 1). A C++ driver, so the small-message numbers
// are hvd's own and not an interpreter's: a ctypes call from Python costs
// several microseconds per call, a few times that per collective.
//
// After the timed iterations, one more call with known inputs is checked
// exactly on every rank; "#wrong" counts the wrong elements over all ranks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/c_api.h"
#include "tools/bench/element_type.h"

namespace {

using hvd::bench::FindType;
using hvd::bench::Get;
using hvd::bench::Put;
using hvd::bench::Type;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::vector<std::string> ops = {"allreduce"};
  size_t begin = 8;
  size_t end = size_t{256} << 20;
  double factor = 2;
  std::string dtype = "float32";
  std::string op = "sum";
  int iters = 50;
  int warmup = 5;
  bool check = true;
  size_t budget = size_t{2} << 30;
  std::string csv;
};

bool ParseSize(const char* text, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || v < 0) return false;
  double scale = 1;
  switch (*end) {
    case 'K':
    case 'k':
      scale = 1024.0;
      ++end;
      break;
    case 'M':
    case 'm':
      scale = 1024.0 * 1024;
      ++end;
      break;
    case 'G':
    case 'g':
      scale = 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * scale);
  return true;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--ops") {
      f->ops = Split(v);
    } else if (a == "-b" || a == "--begin") {
      if (!ParseSize(v, &f->begin)) return false;
    } else if (a == "-e" || a == "--end") {
      if (!ParseSize(v, &f->end)) return false;
    } else if (a == "-f" || a == "--factor") {
      f->factor = std::atof(v);
    } else if (a == "-d" || a == "--dtype") {
      f->dtype = v;
    } else if (a == "-o" || a == "--op") {
      f->op = v;
    } else if (a == "-n" || a == "--iters") {
      f->iters = std::atoi(v);
    } else if (a == "-w" || a == "--warmup") {
      f->warmup = std::atoi(v);
    } else if (a == "-c" || a == "--check") {
      f->check = std::atoi(v) != 0;
    } else if (a == "--budget") {
      if (!ParseSize(v, &f->budget)) return false;
    } else if (a == "--csv") {
      f->csv = v;
    } else {
      return false;
    }
  }
  return f->factor > 1 && f->iters > 0 && f->warmup >= 0 && f->begin > 0;
}

// ---- tensors
// -----------------------------------------------------------------

struct Tensor {
  std::vector<char> bytes;
  int64_t shape[1] = {0};
  DLTensor t{};

  Tensor(const Type& type, size_t count) {
    bytes.resize(std::max<size_t>(1, count * type.bits / 8));
    shape[0] = static_cast<int64_t>(count);
    t.data = bytes.data();
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = type.code;
    t.dtype.bits = type.bits;
    t.dtype.lanes = 1;
    t.shape = shape;
  }
};

struct Rank {
  int rank;
  int size;
};

int OpCode(const std::string& op) {
  if (op == "sum") return HVD_OP_SUM;
  if (op == "avg") return HVD_OP_AVERAGE;
  if (op == "min") return HVD_OP_MIN;
  if (op == "max") return HVD_OP_MAX;
  if (op == "prod") return HVD_OP_PRODUCT;
  return -1;
}

// The value rank r contributes at element i of a reduction (small integers,
// so every dtype and every order of summation is exact).
double Contribution(const std::string& op, int r, size_t i) {
  if (op == "prod") return (r == 0 && i % 2 == 1) ? 2 : 1;
  return (r + 1) * static_cast<double>(i % 3 + 1);
}

double Reduced(const std::string& op, int n, size_t i) {
  const double k = static_cast<double>(i % 3 + 1);
  if (op == "sum") return k * n * (n + 1) / 2;
  if (op == "avg") return k * (n + 1) / 2.0;
  if (op == "min") return k;
  if (op == "max") return k * n;
  return i % 2 == 1 ? 2 : 1;  // prod
}

// Values of the data-movement collectives.
double Tag(int r, int j, size_t i) {
  return static_cast<double>((r * 7 + j * 3 + i) % 50);
}

bool Close(double got, double want) {
  return std::fabs(got - want) <= 1e-3 * std::max(1.0, std::fabs(want));
}

// ---- one collective ---------------------------------------------------------

// Runs one call of `op` on `count` elements per rank (see each case) and
// returns the number of wrong elements when `check`.
class Case {
 public:
  Case(const std::string& op, const Type& type, const Flags& flags, Rank me,
       size_t bytes)
      : op_(op), type_(type), flags_(flags), me_(me) {
    const size_t elem = type.bits / 8;
    const size_t n = static_cast<size_t>(me.size);
    // Per-rank element counts, nccl-tests style.
    if (op == "allreduce" || op == "broadcast") {
      count_ = bytes / elem;
    } else {
      count_ = bytes / elem / n;  // per-rank block
    }
    name_ = "bench." + op + "." + std::to_string(bytes);
  }

  size_t count() const { return count_; }
  // The size actually moved (after rounding down to whole blocks).
  size_t bytes() const {
    const size_t elem = type_.bits / 8;
    if (op_ == "allreduce" || op_ == "broadcast") return count_ * elem;
    return count_ * elem * me_.size;
  }
  double bus_factor() const {
    const double n = me_.size;
    if (op_ == "allreduce") return 2 * (n - 1) / n;
    if (op_ == "broadcast") return 1;
    return (n - 1) / n;
  }

  void Prepare(bool check) {
    const size_t n = static_cast<size_t>(me_.size);
    const size_t in_count =
        (op_ == "allreduce" || op_ == "broadcast" || op_ == "allgather")
            ? count_
            : count_ * n;
    in_ = std::make_unique<Tensor>(type_, in_count);
    if (!check) return;
    for (size_t i = 0; i < in_count; ++i) {
      double v = 0;
      if (op_ == "allreduce") {
        v = Contribution(flags_.op, me_.rank, i);
      } else if (op_ == "reducescatter") {
        v = Contribution(flags_.op, me_.rank, i);
      } else if (op_ == "broadcast") {
        v = me_.rank == 0 ? Tag(0, 0, i) : 0;
      } else if (op_ == "allgather") {
        v = Tag(me_.rank, 0, i);
      } else {  // alltoall: block j goes to rank j
        v = Tag(me_.rank, static_cast<int>(i / count_), i % count_);
      }
      Put(type_, in_->bytes.data(), i, v);
    }
  }

  // One call end to end. False (with a message) if hvd reports an error.
  bool Run(bool check, long* wrong) {
    hvd_options options = hvd_default_options();
    options.name = name_.c_str();
    options.op = OpCode(flags_.op);
    hvd_handle h;
    if (op_ == "allreduce") {
      h = hvd_allreduce_async(&in_->t, nullptr, &options);
    } else if (op_ == "broadcast") {
      options.root_rank = 0;
      h = hvd_broadcast_async(&in_->t, nullptr, &options);
    } else if (op_ == "allgather") {
      h = hvd_allgather_async(&in_->t, &options);
    } else if (op_ == "alltoall") {
      h = hvd_alltoall_async(&in_->t, &options);
    } else {
      h = hvd_reducescatter_async(&in_->t, &options);
    }
    if (hvd_wait(h, 600) != HVD_OK) {
      std::fprintf(stderr, "rank %d: %s of %zu elements failed: %s\n", me_.rank,
                   op_.c_str(), count_, hvd_handle_error(h));
      hvd_release(h);
      return false;
    }
    DLManagedTensor* out = nullptr;
    if (hvd_handle_output_count(h) > 0) out = hvd_handle_output(h, 0);
    if (check) *wrong = Check(out != nullptr ? out->dl_tensor.data : nullptr);
    if (out != nullptr && out->deleter != nullptr) out->deleter(out);
    hvd_release(h);
    return true;
  }

 private:
  long Check(const void* output) const {
    long bad = 0;
    const int n = me_.size;
    if (op_ == "allreduce") {
      for (size_t i = 0; i < count_; ++i) {
        bad +=
            !Close(Get(type_, in_->bytes.data(), i), Reduced(flags_.op, n, i));
      }
    } else if (op_ == "broadcast") {
      for (size_t i = 0; i < count_; ++i) {
        bad += !Close(Get(type_, in_->bytes.data(), i), Tag(0, 0, i));
      }
    } else if (op_ == "allgather") {
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count_; ++i) {
          bad += !Close(Get(type_, output, r * count_ + i), Tag(r, 0, i));
        }
      }
    } else if (op_ == "alltoall") {
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count_; ++i) {
          bad +=
              !Close(Get(type_, output, r * count_ + i), Tag(r, me_.rank, i));
        }
      }
    } else {  // reducescatter: our block of the reduction
      for (size_t i = 0; i < count_; ++i) {
        const size_t g = me_.rank * count_ + i;
        bad += !Close(Get(type_, output, i), Reduced(flags_.op, n, g));
      }
    }
    return bad;
  }

  const std::string op_;
  const Type type_;
  const Flags& flags_;
  const Rank me_;
  size_t count_ = 0;
  std::string name_;
  std::unique_ptr<Tensor> in_;
};

// The sum over ranks of `v` (an int64 allreduce).
long SumOverRanks(long v) {
  int64_t x = v;
  int64_t shape[1] = {1};
  DLTensor t{};
  t.data = &x;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLInt;
  t.dtype.bits = 64;
  t.dtype.lanes = 1;
  t.shape = shape;
  hvd_options options = hvd_default_options();
  options.name = "bench.check";
  hvd_handle h = hvd_allreduce_async(&t, nullptr, &options);
  if (hvd_wait(h, 600) != HVD_OK) x = -1;
  hvd_release(h);
  return static_cast<long>(x);
}

// Rank 0's table on stdout and, with --csv, the same rows in a CSV file.
class Report {
 public:
  Report(const Flags& flags, const Type& type, const Rank& me)
      : flags_(flags), type_(type), me_(me) {}
  ~Report() {
    if (csv_ != nullptr) std::fclose(csv_);
  }

  // Prints the header; false if the CSV file cannot be opened.
  bool Start() {
    if (me_.rank != 0) return true;
    std::printf(
        "# hvd_bench: %d ranks, dtype %s, op %s, %d iterations "
        "(budget %zu bytes), %d warm-up\n",
        me_.size, type_.name, flags_.op.c_str(), flags_.iters, flags_.budget,
        flags_.warmup);
    std::printf("# %-13s %12s %12s %11s %11s %10s %10s %7s\n", "op", "size",
                "count", "median_us", "min_us", "algbw_GB/s", "busbw_GB/s",
                "#wrong");
    if (flags_.csv.empty()) return true;
    csv_ = std::fopen(flags_.csv.c_str(), "w");
    if (csv_ == nullptr) {
      std::perror(flags_.csv.c_str());
      return false;
    }
    std::fprintf(csv_,
                 "system,op,bytes,count,dtype,redop,ranks,iters,"
                 "median_us,min_us,algbw_gbs,busbw_gbs,wrong\n");
    return true;
  }

  // One row: `us` holds the sorted times of the timed iterations.
  void Row(const std::string& op, const Case& c, const std::vector<double>& us,
           long wrong) {
    const double median = us.size() % 2 == 1
                              ? us[us.size() / 2]
                              : (us[us.size() / 2 - 1] + us[us.size() / 2]) / 2;
    const double algbw = c.bytes() / median / 1e3;  // bytes/us -> GB/s
    const double busbw = algbw * c.bus_factor();
    if (me_.rank != 0) return;
    std::printf("  %-13s %12zu %12zu %11.1f %11.1f %10.3f %10.3f %7ld\n",
                op.c_str(), c.bytes(), c.count(), median, us.front(), algbw,
                busbw, wrong);
    std::fflush(stdout);
    if (csv_ == nullptr) return;
    std::fprintf(csv_, "hvd,%s,%zu,%zu,%s,%s,%d,%zu,%.2f,%.2f,%.4f,%.4f,%ld\n",
                 op.c_str(), c.bytes(), c.count(), type_.name,
                 flags_.op.c_str(), me_.size, us.size(), median, us.front(),
                 algbw, busbw, wrong);
    std::fflush(csv_);
  }

 private:
  const Flags& flags_;
  const Type type_;
  const Rank me_;
  FILE* csv_ = nullptr;
};

// Warm-up, timed iterations (their times, sorted, in `us`) and the checked
// call; counts wrong elements into `wrong`. False when a call failed.
bool Measure(Case& c, const Flags& flags, std::vector<double>* us,
             long* wrong) {
  const int iters = static_cast<int>(std::max<size_t>(
      3, std::min<size_t>(flags.iters, flags.budget / c.bytes())));
  c.Prepare(false);
  bool ok = true;
  for (int i = 0; i < flags.warmup && ok; ++i) ok = c.Run(false, wrong);
  for (int i = 0; i < iters && ok; ++i) {
    const auto t0 = Clock::now();
    ok = c.Run(false, wrong);
    us->push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  if (ok && flags.check) {
    c.Prepare(true);
    ok = c.Run(true, wrong);
  }
  std::sort(us->begin(), us->end());
  return ok;
}

// Every size of every op; false when a call failed or a result was wrong.
bool Sweep(const Flags& flags, const Type& type, const Rank& me,
           Report& report) {
  bool all_ok = true;
  for (const std::string& op : flags.ops) {
    for (double s = static_cast<double>(flags.begin);
         s <= static_cast<double>(flags.end) * 1.0000001; s *= flags.factor) {
      Case c(op, type, flags, me, static_cast<size_t>(s));
      if (c.count() == 0) continue;
      std::vector<double> us;
      long wrong = 0;
      if (!Measure(c, flags, &us, &wrong)) return false;
      const long total_wrong = flags.check ? SumOverRanks(wrong) : 0;
      if (total_wrong != 0) all_ok = false;
      report.Row(op, c, us, total_wrong);
    }
  }
  return all_ok;
}

bool KnownOps(const std::vector<std::string>& ops) {
  for (const std::string& op : ops) {
    if (op != "allreduce" && op != "allgather" && op != "broadcast" &&
        op != "alltoall" && op != "reducescatter") {
      std::fprintf(stderr, "hvd_bench: unknown op %s\n", op.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  Type type;
  if (!ParseFlags(argc, argv, &flags) || !FindType(flags.dtype, &type) ||
      OpCode(flags.op) < 0) {
    std::fprintf(stderr,
                 "usage: hvd_bench [--ops LIST] [-b BYTES] [-e BYTES] [-f N] "
                 "[-d TYPE] [-o sum|avg|min|max|prod] [-n N] [-w N] [-c 0|1] "
                 "[--budget BYTES] [--csv PATH]\n");
    return 2;
  }
  if (!KnownOps(flags.ops)) return 2;
  if (hvd_init() != HVD_OK) {
    std::fprintf(stderr, "hvd_bench: hvd_init failed: %s\n", hvd_last_error());
    return 1;
  }
  const Rank me{hvd_rank(), hvd_size()};
  bool ok = false;
  {
    Report report(flags, type, me);
    ok = report.Start() && Sweep(flags, type, me, report);
  }
  hvd_shutdown();
  return ok ? 0 : 1;
}
