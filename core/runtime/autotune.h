// Rank 0's autotuner: while the job trains, it measures the allreduce bus
// bandwidth of the job's steps and searches, by Bayesian optimisation
// (bayes_opt.h), the knobs that decide it: the fusion threshold, the cycle
// time, the small-message threshold, the ring's chunk size and, where
// several hosts hold several ranks, the hierarchical allreduce and
// allgather on or off. Knobs the user set are held (AutotuneOptions). Rank 0 decides alone; the values
// travel in the negotiation's ResponseList (proto Tuning), so every rank
// switches at the same cycle.
//
// A step ends when an allreduced tensor's name comes again (the next step's
// gradients). A sample is `steps_per_sample` whole steps at one set of
// values: the step under way when the values change is not counted. Its
// score is the bus bandwidth in GB/s: the bytes each rank allreduced,
// times 2(size-1)/size, over the samples' wall time. The first
// `warmup_samples` samples are discarded; then `max_samples` are scored,
// the first at the starting values, the others where the optimiser
// expects the most improvement; then the sampled values with the best
// expected score (the model's mean, which smooths a noisy machine's luck)
// are frozen, and logged with that score.
// So tuning ends after (warmup_samples + max_samples) * steps_per_sample
// steps, plus one partial step per change.
#ifndef HVD_CORE_RUNTIME_AUTOTUNE_H_
#define HVD_CORE_RUNTIME_AUTOTUNE_H_

#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/runtime/autotune_options.h"
#include "core/runtime/bayes_opt.h"
#include "proto/negotiation.pb.h"

namespace hvd::runtime {

// Not thread-safe: rank 0's background thread owns it.
class Autotuner {
 public:
  // `start`: the values in force at init; `size`: the job's ranks;
  // `hierarchical`: whether the hierarchical algorithms can apply (several
  // ranks on several hosts), else their switches are not searched. Fails
  // when the log file cannot be written.
  static absl::StatusOr<std::unique_ptr<Autotuner>> Create(
      const AutotuneOptions& options, const Tuning& start, int size,
      bool hierarchical);

  // Called with every list rank 0 is about to send, at `now`: the values
  // every rank switches to after it, when they change with this list.
  std::optional<Tuning> Observe(const ResponseList& list, absl::Time now);

  bool frozen() const { return phase_ == Phase::kFrozen; }
  const Tuning& current() const { return current_; }

 private:
  enum class Phase { kWarmup, kSearch, kFrozen };
  Autotuner(const AutotuneOptions& options, const Tuning& start, int size,
            std::vector<int> free_knobs);

  // A step ended at `now`: the values to switch to, if the sample is over.
  std::optional<Tuning> StepEnded(absl::Time now);
  std::optional<Tuning> SampleDone(double score);
  std::optional<Tuning> Freeze();
  std::vector<double> Encode(const Tuning& t) const;
  Tuning Decode(const std::vector<double>& x) const;
  void Log(absl::string_view phase, int sample, const Tuning& t,
           std::optional<double> score);

  AutotuneOptions options_;
  double bus_factor_;            // 2(size-1)/size
  std::vector<int> free_knobs_;  // indexes of the knobs being tuned
  BayesOpt optimizer_;
  std::ofstream log_;
  Phase phase_ = Phase::kWarmup;
  int warmups_ = 0;
  std::vector<std::pair<Tuning, double>> scored_;
  Tuning current_;
  // The sample under way.
  std::set<std::string> seen_;  // names allreduced in the current step
  bool counting_ = false;       // false until the first step boundary
  int steps_ = 0;
  int64_t bytes_ = 0;
  absl::Time sample_start_;
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_AUTOTUNE_H_
