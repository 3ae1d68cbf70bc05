#include "core/runtime/bayes_opt.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

using Objective = std::function<double(const std::vector<double>&)>;

BayesOptOptions Options(int dims, uint64_t seed = 1) {
  BayesOptOptions options;
  options.dims = dims;
  options.seed = seed;
  return options;
}

// Runs `samples` rounds of Suggest, evaluate, Add.
void Optimise(BayesOpt& opt, const Objective& f, int samples) {
  for (int i = 0; i < samples; ++i) {
    std::vector<double> x = opt.Suggest();
    const double y = f(x);
    opt.Add(std::move(x), y);
  }
}

// A bowl with its maximum (0) at `centre`.
Objective Bowl(std::vector<double> centre) {
  return [centre](const std::vector<double>& x) {
    double d2 = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      d2 += (x[i] - centre[i]) * (x[i] - centre[i]);
    }
    return -d2;
  };
}

TEST(BayesOpt, FirstSuggestionIsTheCubeCentre) {
  BayesOpt opt(Options(3));
  EXPECT_EQ(opt.Suggest(), std::vector<double>(3, 0.5));
  EXPECT_EQ(opt.samples(), 0);
}

TEST(BayesOpt, PredictionWithoutSamplesIsTheStandardPrior) {
  BayesOpt opt(Options(2));
  const auto [mean, sd] = opt.Predict({0.3, 0.3});
  EXPECT_EQ(mean, 0.0);
  EXPECT_EQ(sd, 1.0);
}

TEST(BayesOpt, AddClampsPointsAndTracksTheBest) {
  BayesOpt opt(Options(2));
  opt.Add({-0.5, 0.4}, 1.0);
  opt.Add({1.7, 0.2}, 3.0);
  opt.Add({0.1, 0.1}, 2.0);
  EXPECT_EQ(opt.samples(), 3);
  EXPECT_EQ(opt.best_y(), 3.0);
  EXPECT_EQ(opt.best_x(), (std::vector<double>{1.0, 0.2}));
}

TEST(BayesOpt, AddFitsPointsToTheDimensions) {
  BayesOpt opt(Options(2));
  opt.Add({0.9}, 1.0);
  EXPECT_EQ(opt.best_x(), (std::vector<double>{0.9, 0.5}));
  opt.Add({0.1, 0.2, 0.3}, 2.0);
  EXPECT_EQ(opt.best_x(), (std::vector<double>{0.1, 0.2}));
}

TEST(BayesOpt, AddUpdatesTheModel) {
  BayesOpt opt(Options(1));
  opt.Add({0.2}, 1.0);
  opt.Add({0.8}, 2.0);
  const double before = opt.Predict({0.8}).first;
  opt.Add({0.8}, 4.0);
  EXPECT_GT(opt.Predict({0.8}).first, before + 0.5);
}

TEST(BayesOpt, PredictionInterpolatesSamplesWhenNoiseIsSmall) {
  BayesOptOptions options = Options(1);
  options.noise = 1e-6;
  BayesOpt opt(options);
  const std::vector<double> xs = {0.05, 0.2, 0.35, 0.5};
  for (double x : xs) opt.Add({x}, 100.0 + 10.0 * std::sin(6.0 * x));
  for (double x : xs) {
    const auto [mean, sd] = opt.Predict({x});
    EXPECT_NEAR(mean, 100.0 + 10.0 * std::sin(6.0 * x), 0.01) << x;
    EXPECT_LT(sd, 0.05) << x;
  }
  // Far from every sample the model is unsure.
  EXPECT_GT(opt.Predict({1.0}).second, 10.0 * opt.Predict({0.35}).second);
}

TEST(BayesOpt, LargeNoiseSmoothsRatherThanInterpolates) {
  BayesOpt opt(Options(1));  // default noise 0.8
  opt.Add({0.2}, 0.0);
  opt.Add({0.8}, 10.0);
  const double mean_at_high = opt.Predict({0.8}).first;
  EXPECT_LT(mean_at_high, 9.0);
  EXPECT_GT(mean_at_high, 5.0);
}

TEST(BayesOpt, PredictionIsInTheScoresOwnUnits) {
  BayesOpt plain(Options(2));
  BayesOpt scaled(Options(2));
  const Objective f = Bowl({0.6, 0.4});
  for (const std::vector<double>& x :
       {std::vector<double>{0.1, 0.2}, {0.5, 0.5}, {0.9, 0.3}, {0.4, 0.8}}) {
    plain.Add(x, f(x));
    scaled.Add(x, 4096.0 + 1000.0 * f(x));
  }
  for (const std::vector<double>& x :
       {std::vector<double>{0.5, 0.5}, {0.0, 1.0}, {0.7, 0.1}}) {
    const auto [mean, sd] = plain.Predict(x);
    const auto [scaled_mean, scaled_sd] = scaled.Predict(x);
    EXPECT_NEAR(scaled_mean, 4096.0 + 1000.0 * mean, 1e-6);
    EXPECT_NEAR(scaled_sd, 1000.0 * sd, 1e-6);
  }
}

TEST(BayesOpt, SuggestionsDoNotDependOnTheScoresScale) {
  BayesOpt plain(Options(2));
  BayesOpt scaled(Options(2));
  const Objective f = Bowl({0.6, 0.4});
  for (int i = 0; i < 6; ++i) {
    std::vector<double> x = plain.Suggest();
    ASSERT_EQ(scaled.Suggest(), x) << "round " << i;
    plain.Add(x, f(x));
    // A power of two keeps the normalised scores bit-identical.
    scaled.Add(x, 1024.0 * f(x));
  }
}

TEST(BayesOpt, UncertaintyGrowsAwayFromSamples) {
  BayesOpt opt(Options(1));
  opt.Add({0.5}, 1.0);
  opt.Add({0.55}, 2.0);
  const double near_sd = opt.Predict({0.52}).second;
  const double far_sd = opt.Predict({0.0}).second;
  EXPECT_GT(far_sd, near_sd);
}

TEST(BayesOpt, FindsTheMaximumOfAOneDimensionalPeak) {
  // A noiseless objective, so a small noise term: the model then trusts
  // each score and refines the peak well past what 12 random tries reach.
  BayesOptOptions options = Options(1);
  options.noise = 0.1;
  BayesOpt opt(options);
  const Objective peak = [](const std::vector<double>& x) {
    return std::exp(-std::pow((x[0] - 0.23) / 0.25, 2));
  };
  Optimise(opt, peak, 12);
  EXPECT_NEAR(opt.best_x()[0], 0.23, 0.02);
}

// Random search meets these bounds about half the time in two dimensions
// and one time in seven in four; each case runs three seeds.
TEST(BayesOpt, FindsTheMaximumOfATwoDimensionalBowlWithinTwentySamples) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    BayesOpt opt(Options(2, seed));
    Optimise(opt, Bowl({0.7, 0.2}), 20);
    EXPECT_NEAR(opt.best_x()[0], 0.7, 0.1) << "seed " << seed;
    EXPECT_NEAR(opt.best_x()[1], 0.2, 0.1) << "seed " << seed;
  }
}

TEST(BayesOpt, FindsTheMaximumOfAFourDimensionalBowlWithinThirtySamples) {
  const std::vector<double> centre = {0.8, 0.3, 0.6, 0.1};
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    BayesOpt opt(Options(4, seed));
    Optimise(opt, Bowl(centre), 30);
    for (size_t i = 0; i < centre.size(); ++i) {
      EXPECT_NEAR(opt.best_x()[i], centre[i], 0.15)
          << "seed " << seed << " coordinate " << i;
    }
  }
}

TEST(BayesOpt, ApproachesTheMaximumOfAnEightDimensionalBowlWithinFortySamples) {
  const std::vector<double> centre = {0.8, 0.3, 0.6, 0.1, 0.5, 0.7, 0.2, 0.4};
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    BayesOpt opt(Options(8, seed));
    Optimise(opt, Bowl(centre), 40);
    EXPECT_GT(opt.best_y(), -0.05) << "seed " << seed;
  }
}

TEST(BayesOpt, ToleratesNoisyScores) {
  // The bowl's scores range over [-1.0525, 0] on the square; each is off by
  // up to 5% of that range, from a fixed pseudo-random sequence.
  const Objective bowl = Bowl({0.3, 0.75});
  const double amplitude = 0.05 * 1.0525;
  uint64_t state = 12345;
  const Objective noisy = [&](const std::vector<double>& x) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    return bowl(x) + (2.0 * u - 1.0) * amplitude;
  };
  BayesOpt opt(Options(2, /*seed=*/7));
  Optimise(opt, noisy, 25);
  EXPECT_NEAR(opt.best_x()[0], 0.3, 0.15);
  EXPECT_NEAR(opt.best_x()[1], 0.75, 0.15);
  // The model has learnt the bowl's shape through the noise.
  EXPECT_GT(opt.Predict({0.3, 0.75}).first, opt.Predict({1.0, 0.0}).first);
}

TEST(BayesOpt, SameSeedSameSuggestions) {
  BayesOpt a(Options(3, /*seed=*/42));
  BayesOpt b(Options(3, /*seed=*/42));
  const Objective f = Bowl({0.1, 0.9, 0.5});
  for (int i = 0; i < 8; ++i) {
    std::vector<double> xa = a.Suggest();
    std::vector<double> xb = b.Suggest();
    ASSERT_EQ(xa, xb) << "round " << i;
    a.Add(xa, f(xa));
    b.Add(xb, f(xb));
  }
}

TEST(BayesOpt, DifferentSeedsExploreDifferently) {
  BayesOpt a(Options(3, /*seed=*/1));
  BayesOpt b(Options(3, /*seed=*/2));
  const Objective f = Bowl({0.1, 0.9, 0.5});
  Optimise(a, f, 3);
  Optimise(b, f, 3);
  EXPECT_NE(a.Suggest(), b.Suggest());
}

TEST(BayesOpt, SuggestionsStayInTheUnitCube) {
  // The optimum sits in a corner, so perturbations of the best point keep
  // stepping outside the cube and must be clamped back.
  BayesOpt opt(Options(3, /*seed=*/3));
  const Objective corner = [](const std::vector<double>& x) {
    return x[0] + x[1] - x[2];
  };
  for (int i = 0; i < 20; ++i) {
    std::vector<double> x = opt.Suggest();
    ASSERT_EQ(x.size(), 3u);
    for (double v : x) {
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
    }
    const double y = corner(x);
    opt.Add(std::move(x), y);
  }
  EXPECT_GT(opt.best_y(), 1.8);
}

TEST(BayesOpt, RepeatedIdenticalSamplesDoNotBreakTheFit) {
  BayesOptOptions options = Options(2);
  options.noise = 0.0;
  BayesOpt opt(options);
  for (int i = 0; i < 5; ++i) opt.Add({0.4, 0.4}, 1.0 + i);
  // Five scores at one point: the model settles on their average.
  const auto [mean, sd] = opt.Predict({0.4, 0.4});
  EXPECT_NEAR(mean, 3.0, 1e-3);
  EXPECT_TRUE(std::isfinite(sd));
  const std::vector<double> next = opt.Suggest();
  ASSERT_EQ(next.size(), 2u);
  EXPECT_TRUE(std::isfinite(next[0]) && std::isfinite(next[1]));
}

}  // namespace
}  // namespace hvd::runtime
