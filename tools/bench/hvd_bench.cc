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

namespace {

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
    case 'K': case 'k': scale = 1024.0; ++end; break;
    case 'M': case 'm': scale = 1024.0 * 1024; ++end; break;
    case 'G': case 'g': scale = 1024.0 * 1024 * 1024; ++end; break;
    default: break;
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

// ---- element types -----------------------------------------------------------

struct Type {
  const char* name;
  uint8_t code;  // DLDataTypeCode
  uint8_t bits;
};

bool FindType(const std::string& name, Type* t) {
  static const Type kTypes[] = {
      {"float32", kDLFloat, 32}, {"float64", kDLFloat, 64},
      {"float16", kDLFloat, 16}, {"bfloat16", kDLBfloat, 16},
      {"int32", kDLInt, 32},     {"int64", kDLInt, 64},
      {"uint8", kDLUInt, 8},
  };
  for (const Type& k : kTypes) {
    if (name == k.name) {
      *t = k;
      return true;
    }
  }
  return false;
}

uint16_t FloatToHalf(float f) {  // small integers only: exact
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  const uint32_t mant = x & 0x7fffff;
  if ((x & 0x7fffffff) == 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (exp << 10) | (mant >> 13));
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  uint32_t x;
  if (exp == 0 && mant == 0) {
    x = sign;
  } else if (exp == 0) {  // subnormal
    float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void Put(const Type& t, void* base, size_t i, double v) {
  char* p = static_cast<char*>(base);
  if (t.code == kDLFloat && t.bits == 32) {
    reinterpret_cast<float*>(p)[i] = static_cast<float>(v);
  } else if (t.code == kDLFloat && t.bits == 64) {
    reinterpret_cast<double*>(p)[i] = v;
  } else if (t.code == kDLFloat && t.bits == 16) {
    reinterpret_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
  } else if (t.code == kDLBfloat) {
    const float f = static_cast<float>(v);
    uint32_t x;
    std::memcpy(&x, &f, 4);
    reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(x >> 16);
  } else if (t.code == kDLInt && t.bits == 32) {
    reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
  } else if (t.code == kDLInt && t.bits == 64) {
    reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
  } else {
    reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
  }
}

double Get(const Type& t, const void* base, size_t i) {
  const char* p = static_cast<const char*>(base);
  if (t.code == kDLFloat && t.bits == 32) {
    return reinterpret_cast<const float*>(p)[i];
  } else if (t.code == kDLFloat && t.bits == 64) {
    return reinterpret_cast<const double*>(p)[i];
  } else if (t.code == kDLFloat && t.bits == 16) {
    return HalfToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
  } else if (t.code == kDLBfloat) {
    const uint32_t x =
        static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  } else if (t.code == kDLInt && t.bits == 32) {
    return reinterpret_cast<const int32_t*>(p)[i];
  } else if (t.code == kDLInt && t.bits == 64) {
    return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
  }
  return reinterpret_cast<const uint8_t*>(p)[i];
}

// ---- tensors -----------------------------------------------------------------

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
    const size_t in_count = (op_ == "allreduce" || op_ == "broadcast" ||
                             op_ == "allgather")
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
      std::fprintf(stderr, "rank %d: %s of %zu elements failed: %s\n",
                   me_.rank, op_.c_str(), count_, hvd_handle_error(h));
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
        bad += !Close(Get(type_, in_->bytes.data(), i), Reduced(flags_.op, n, i));
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
          bad += !Close(Get(type_, output, r * count_ + i), Tag(r, me_.rank, i));
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
  for (const std::string& op : flags.ops) {
    if (op != "allreduce" && op != "allgather" && op != "broadcast" &&
        op != "alltoall" && op != "reducescatter") {
      std::fprintf(stderr, "hvd_bench: unknown op %s\n", op.c_str());
      return 2;
    }
  }
  if (hvd_init() != HVD_OK) {
    std::fprintf(stderr, "hvd_bench: hvd_init failed: %s\n", hvd_last_error());
    return 1;
  }
  const Rank me{hvd_rank(), hvd_size()};
  FILE* csv = nullptr;
  if (me.rank == 0) {
    std::printf("# hvd_bench: %d ranks, dtype %s, op %s, %d iterations "
                "(budget %zu bytes), %d warm-up\n",
                me.size, type.name, flags.op.c_str(), flags.iters,
                flags.budget, flags.warmup);
    std::printf("# %-13s %12s %12s %11s %11s %10s %10s %7s\n", "op", "size",
                "count", "median_us", "min_us", "algbw_GB/s", "busbw_GB/s",
                "#wrong");
    if (!flags.csv.empty()) {
      csv = std::fopen(flags.csv.c_str(), "w");
      if (csv == nullptr) {
        std::perror(flags.csv.c_str());
        return 1;
      }
      std::fprintf(csv, "system,op,bytes,count,dtype,redop,ranks,iters,"
                        "median_us,min_us,algbw_gbs,busbw_gbs,wrong\n");
    }
  }
  bool all_ok = true;
  for (const std::string& op : flags.ops) {
    for (double s = static_cast<double>(flags.begin);
         s <= static_cast<double>(flags.end) * 1.0000001; s *= flags.factor) {
      Case c(op, type, flags, me, static_cast<size_t>(s));
      if (c.count() == 0) continue;
      const int iters = static_cast<int>(std::max<size_t>(
          3, std::min<size_t>(flags.iters, flags.budget / c.bytes())));
      c.Prepare(false);
      long wrong = 0;
      bool ok = true;
      for (int i = 0; i < flags.warmup && ok; ++i) ok = c.Run(false, &wrong);
      std::vector<double> us;
      for (int i = 0; i < iters && ok; ++i) {
        const auto t0 = Clock::now();
        ok = c.Run(false, &wrong);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() -
                                                               t0)
                         .count());
      }
      if (ok && flags.check) {
        c.Prepare(true);
        ok = c.Run(true, &wrong);
      }
      if (!ok) {
        all_ok = false;
        break;
      }
      const long total_wrong = flags.check ? SumOverRanks(wrong) : 0;
      if (total_wrong != 0) all_ok = false;
      std::sort(us.begin(), us.end());
      const double median = us.size() % 2 == 1
                                ? us[us.size() / 2]
                                : (us[us.size() / 2 - 1] + us[us.size() / 2]) / 2;
      const double algbw = c.bytes() / median / 1e3;  // bytes/us -> GB/s
      const double busbw = algbw * c.bus_factor();
      if (me.rank == 0) {
        std::printf("  %-13s %12zu %12zu %11.1f %11.1f %10.3f %10.3f %7ld\n",
                    op.c_str(), c.bytes(), c.count(), median, us.front(),
                    algbw, busbw, total_wrong);
        std::fflush(stdout);
        if (csv != nullptr) {
          std::fprintf(csv, "hvd,%s,%zu,%zu,%s,%s,%d,%d,%.2f,%.2f,%.4f,%.4f,"
                            "%ld\n",
                       op.c_str(), c.bytes(), c.count(), type.name,
                       flags.op.c_str(), me.size, iters, median, us.front(),
                       algbw, busbw, total_wrong);
          std::fflush(csv);
        }
      }
    }
  }
  if (csv != nullptr) std::fclose(csv);
  hvd_shutdown();
  return all_ok ? 0 : 1;
}
