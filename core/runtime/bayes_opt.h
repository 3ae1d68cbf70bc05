// A small Bayesian optimizer for the autotuner: Gaussian-process regression
// with a squared-exponential (RBF) kernel over points in the unit cube
// [0,1]^d, and the expected-improvement acquisition that picks the next point
// to try. Scores are maximised.
#ifndef HVD_CORE_RUNTIME_BAYES_OPT_H_
#define HVD_CORE_RUNTIME_BAYES_OPT_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace hvd::runtime {

struct BayesOptOptions {
  // Dimensions of the search space (>= 1).
  int dims = 1;
  // Added to the kernel's diagonal, on scores normalised to mean 0 and
  // standard deviation 1 (0..1 typical). Larger values smooth noisy scores.
  double noise = 0.8;
  // Kernel length scale, in unit-cube units.
  double length_scale = 0.3;
  // Exploration margin of expected improvement, in normalised score units.
  double xi = 0.01;
  // Points scored per Suggest.
  int candidates = 2000;
  // Suggestions are a deterministic function of the seed and the samples.
  uint64_t seed = 1;
};

// Not thread-safe: one thread at a time, including the const methods (they
// refit the cached model lazily).
class BayesOpt {
 public:
  explicit BayesOpt(BayesOptOptions options);

  // Records that `x` scored `y` (finite; higher is better). `x` holds `dims`
  // values; each is clamped to [0,1], missing ones are taken as 0.5 and extra
  // ones dropped.
  void Add(std::vector<double> x, double y);

  // The next point to try: among random uniform points and gaussian
  // perturbations of the best point so far (all in [0,1]^d), the one with
  // the highest expected improvement under the model fitted to every sample.
  // With no sample yet: the cube's centre.
  std::vector<double> Suggest();

  // The best point added so far and its score. Require samples() >= 1.
  const std::vector<double>& best_x() const;
  double best_y() const;
  int samples() const;

  // The model's posterior mean and standard deviation at `x`, in the scores'
  // own units. With no samples: mean 0, standard deviation 1.
  std::pair<double, double> Predict(const std::vector<double>& x) const;

 private:
  // Posterior mean and standard deviation at `x` on normalised scores.
  std::pair<double, double> PredictNormalised(
      const std::vector<double>& x) const;
  double Kernel(const std::vector<double>& a,
                const std::vector<double>& b) const;
  double ExpectedImprovement(const std::vector<double>& x,
                             double best_normalised) const;
  // Fills the cache below if Add invalidated it.
  void Fit() const;
  std::vector<double> Candidate(bool near_best);

  const BayesOptOptions options_;
  std::vector<std::vector<double>> xs_;
  std::vector<double> ys_;
  size_t best_ = 0;  // index of the highest score, once ys_ is non-empty
  std::mt19937_64 rng_;

  // Cached fit, valid while fitted_ is true.
  mutable bool fitted_ = false;
  mutable double y_mean_ = 0.0;
  mutable double y_sd_ = 1.0;
  // Lower-triangular Cholesky factor of K + noise*I, row-major n x n.
  mutable std::vector<double> chol_;
  // (K + noise*I)^-1 * normalised scores.
  mutable std::vector<double> alpha_;
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_BAYES_OPT_H_
