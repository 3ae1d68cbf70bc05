#include "core/runtime/bayes_opt.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <utility>
#include <vector>

namespace hvd::runtime {
namespace {

// Below this posterior standard deviation (normalised units) a point is
// treated as known: no improvement is expected there.
constexpr double kMinSd = 1e-9;
// Diagonal jitter first tried when the kernel matrix is not numerically
// positive definite (duplicate points with zero noise); raised tenfold per try.
constexpr double kJitter = 1e-9;
constexpr int kJitterTries = 10;

double Clamp01(double v) {
  if (!(v >= 0.0)) return 0.0;  // also maps NaN to 0
  return std::min(v, 1.0);
}

double NormalPdf(double z) {
  return std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
}

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Lower-triangular L with L * L^T = a (row-major n x n). False if `a` is not
// positive definite.
bool Cholesky(const std::vector<double>& a, size_t n, std::vector<double>* l) {
  l->assign(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double sum = a[i * n + j];
      for (size_t k = 0; k < j; ++k) sum -= (*l)[i * n + k] * (*l)[j * n + k];
      if (i == j) {
        if (!(sum > 0.0)) return false;
        (*l)[i * n + i] = std::sqrt(sum);
      } else {
        (*l)[i * n + j] = sum / (*l)[j * n + j];
      }
    }
  }
  return true;
}

// Solves L * x = b in place (forward substitution).
void SolveLower(const std::vector<double>& l, size_t n,
                std::vector<double>* b) {
  for (size_t i = 0; i < n; ++i) {
    double sum = (*b)[i];
    for (size_t k = 0; k < i; ++k) sum -= l[i * n + k] * (*b)[k];
    (*b)[i] = sum / l[i * n + i];
  }
}

// Solves L^T * x = b in place (back substitution).
void SolveUpper(const std::vector<double>& l, size_t n,
                std::vector<double>* b) {
  for (size_t i = n; i-- > 0;) {
    double sum = (*b)[i];
    for (size_t k = i + 1; k < n; ++k) sum -= l[k * n + i] * (*b)[k];
    (*b)[i] = sum / l[i * n + i];
  }
}

}  // namespace

BayesOpt::BayesOpt(BayesOptOptions options)
    : options_(options), rng_(options.seed) {}

void BayesOpt::Add(std::vector<double> x, double y) {
  x.resize(static_cast<size_t>(std::max(options_.dims, 1)), 0.5);
  for (double& v : x) v = Clamp01(v);
  xs_.push_back(std::move(x));
  ys_.push_back(y);
  if (ys_.size() == 1 || y > ys_[best_]) best_ = ys_.size() - 1;
  fitted_ = false;
}

const std::vector<double>& BayesOpt::best_x() const { return xs_[best_]; }

double BayesOpt::best_y() const { return ys_[best_]; }

int BayesOpt::samples() const { return static_cast<int>(ys_.size()); }

double BayesOpt::Kernel(const std::vector<double>& a,
                        const std::vector<double>& b) const {
  double d2 = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = a[i] - b[i];
    d2 += d * d;
  }
  const double ls = options_.length_scale;
  return std::exp(-0.5 * d2 / (ls * ls));
}

void BayesOpt::Fit() const {
  if (fitted_) return;
  const size_t n = ys_.size();
  double mean = 0.0;
  for (double y : ys_) mean += y;
  mean /= static_cast<double>(n);
  double var = 0.0;
  for (double y : ys_) var += (y - mean) * (y - mean);
  const double sd = n > 1 ? std::sqrt(var / static_cast<double>(n)) : 0.0;
  y_mean_ = mean;
  y_sd_ = sd > 0.0 ? sd : 1.0;

  std::vector<double> k(n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) k[i * n + j] = Kernel(xs_[i], xs_[j]);
    k[i * n + i] += std::max(options_.noise, 0.0);
  }
  double jitter = kJitter;
  for (int t = 0; t < kJitterTries && !Cholesky(k, n, &chol_); ++t) {
    for (size_t i = 0; i < n; ++i) k[i * n + i] += jitter;
    jitter *= 10.0;
  }

  alpha_.resize(n);
  for (size_t i = 0; i < n; ++i) alpha_[i] = (ys_[i] - y_mean_) / y_sd_;
  SolveLower(chol_, n, &alpha_);
  SolveUpper(chol_, n, &alpha_);
  fitted_ = true;
}

std::pair<double, double> BayesOpt::PredictNormalised(
    const std::vector<double>& x) const {
  Fit();
  const size_t n = ys_.size();
  std::vector<double> ks(n);
  double mu = 0.0;
  for (size_t i = 0; i < n; ++i) {
    ks[i] = Kernel(x, xs_[i]);
    mu += ks[i] * alpha_[i];
  }
  SolveLower(chol_, n, &ks);
  double explained = 0.0;
  for (double v : ks) explained += v * v;
  const double var = std::max(Kernel(x, x) - explained, 0.0);
  return {mu, std::sqrt(var)};
}

std::pair<double, double> BayesOpt::Predict(
    const std::vector<double>& x) const {
  if (ys_.empty()) return {0.0, 1.0};
  const auto [mu, sd] = PredictNormalised(x);
  return {y_mean_ + y_sd_ * mu, y_sd_ * sd};
}

double BayesOpt::ExpectedImprovement(const std::vector<double>& x,
                                     double best_normalised) const {
  const auto [mu, sd] = PredictNormalised(x);
  if (sd < kMinSd) return 0.0;
  const double gain = mu - best_normalised - options_.xi;
  const double z = gain / sd;
  return gain * NormalCdf(z) + sd * NormalPdf(z);
}

std::vector<double> BayesOpt::Candidate(bool near_best) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> x(static_cast<size_t>(std::max(options_.dims, 1)));
  if (!near_best) {
    for (double& v : x) v = uniform(rng_);
    return x;
  }
  // Perturbation scales spread log-uniformly from the length scale down to
  // a thirtieth of it, so the search both refines and steps around the best.
  const double scale =
      options_.length_scale * std::pow(10.0, -1.5 * uniform(rng_));
  std::normal_distribution<double> gauss(0.0, scale);
  const std::vector<double>& best = xs_[best_];
  for (size_t i = 0; i < x.size(); ++i) x[i] = Clamp01(best[i] + gauss(rng_));
  return x;
}

std::vector<double> BayesOpt::Suggest() {
  if (ys_.empty()) {
    return std::vector<double>(static_cast<size_t>(std::max(options_.dims, 1)),
                               0.5);
  }
  Fit();
  const double best_normalised = (ys_[best_] - y_mean_) / y_sd_;
  std::vector<double> chosen;
  double chosen_ei = -1.0;
  const int count = std::max(options_.candidates, 1);
  for (int c = 0; c < count; ++c) {
    std::vector<double> x = Candidate(/*near_best=*/c % 2 == 1);
    const double ei = ExpectedImprovement(x, best_normalised);
    if (ei > chosen_ei) {
      chosen_ei = ei;
      chosen = std::move(x);
    }
  }
  return chosen;
}

}  // namespace hvd::runtime
