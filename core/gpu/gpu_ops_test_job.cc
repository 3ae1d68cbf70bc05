#include "core/gpu/gpu_ops_test_job.h"

#include <cmath>

#include "gtest/gtest.h"

namespace hvd::gpu::testjob {

Options Shared(int n) {
  Options o;
  o.ranks.assign(n, RankSetup{});
  return o;
}

Options Distinct(int n) {
  Options o;
  for (int r = 0; r < n; ++r)
    o.ranks.push_back({"host", absl::StrCat("GPU-", r)});
  return o;
}

Response AllreduceResponse(const std::vector<std::string>& names,
                           const std::vector<int64_t>& counts, DataType dtype,
                           ReduceOp op, double pre, double post, int set) {
  Response r;
  r.set_type(runtime::ALLREDUCE);
  for (const auto& n : names) r.add_names(n);
  for (int64_t c : counts) r.add_sizes(c);
  r.set_dtype(static_cast<int32_t>(dtype));
  r.set_device(static_cast<int32_t>(DeviceType::kGpu));
  r.set_op(static_cast<int32_t>(op));
  r.set_prescale(pre);
  r.set_postscale(post);
  r.set_process_set(set);
  return r;
}

std::vector<std::vector<float>> RunAllreduce(Job& job,
                                             const std::vector<int64_t>& counts,
                                             ReduceOp op, double pre,
                                             double post,
                                             const std::string& tag) {
  const int n = job.size();
  std::vector<std::vector<std::vector<float>>> data(n);
  std::vector<std::string> names;
  for (size_t t = 0; t < counts.size(); ++t) {
    names.push_back(absl::StrCat(tag, t));
  }
  for (int r = 0; r < n; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    data[r].resize(counts.size());
    for (size_t t = 0; t < counts.size(); ++t) {
      auto& v = data[r][t];
      v.resize(counts[t]);
      for (int64_t i = 0; i < counts[t]; ++i) v[i] = r + 1 + i;
      entries.push_back(job.Entry(r, names[t], DataType::kFloat32, {counts[t]},
                                  v.data(), v.data()));
    }
    EXPECT_TRUE(job.Execute(r,
                            AllreduceResponse(names, counts, DataType::kFloat32,
                                              op, pre, post),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < n; ++r) {
    for (const auto& name : names) {
      const Outcome o = job.Wait(r, name);
      EXPECT_TRUE(o.status.ok())
          << "rank " << r << " " << name << ": " << o.status;
    }
  }
  for (int r = 1; r < n; ++r) EXPECT_EQ(data[r], data[0]) << "rank " << r;
  return data[0];
}

namespace {

float Expected(int n, int64_t i, ReduceOp op, double pre, double post) {
  double sum = 0, lo = 1e30, hi = -1e30, prod = 1;
  for (int r = 0; r < n; ++r) {
    const double v = (r + 1 + i) * pre;
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    prod *= v;
  }
  switch (op) {
    case ReduceOp::kSum:
      return static_cast<float>(sum * post);
    case ReduceOp::kAverage:
      return static_cast<float>(sum / n * post);
    case ReduceOp::kMin:
      return static_cast<float>(lo * post);
    case ReduceOp::kMax:
      return static_cast<float>(hi * post);
    default:
      return static_cast<float>(prod * post);
  }
}

}  // namespace

void ExpectReduced(const std::vector<std::vector<float>>& got,
                   const std::vector<int64_t>& counts, int n, ReduceOp op,
                   double pre, double post) {
  for (size_t t = 0; t < counts.size(); ++t) {
    for (int64_t i = 0; i < counts[t]; ++i) {
      EXPECT_NEAR(got[t][i], Expected(n, i, op, pre, post),
                  1e-4 * std::abs(Expected(n, i, op, pre, post)))
          << "tensor " << t << " element " << i;
    }
  }
}

Response DataResponse(runtime::OpType type, const std::string& name,
                      DataType dtype, std::vector<int64_t> sizes,
                      int64_t row_elems) {
  Response r;
  r.set_type(type);
  r.add_names(name);
  r.set_dtype(static_cast<int32_t>(dtype));
  r.set_device(static_cast<int32_t>(DeviceType::kGpu));
  for (int64_t s : sizes) r.add_sizes(s);
  r.add_row_elems(row_elems);
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  return r;
}

}  // namespace hvd::gpu::testjob
