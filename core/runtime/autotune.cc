#include "core/runtime/autotune.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/logging.h"
#include "core/runtime/coordinator.h"

namespace hvd::runtime {
namespace {

// A tuned knob: its log column, its range (searched on a log scale; an
// on/off knob's is 0 to 1, on from the middle up), how a value is rounded,
// and its Tuning field.
struct Knob {
  const char* column;
  double low, high;
  int64_t grain;
  bool on_off;
  int64_t (*get)(const Tuning&);
  void (*set)(Tuning&, int64_t);
};

constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;
// Names remembered for finding step ends: a job whose names never repeat
// has no steps, and must not grow the set without bound.
constexpr size_t kMaxStepNames = 1 << 16;

constexpr int kKnobCount = 6;

const Knob kKnobs[kKnobCount] = {
    {"fusion_threshold_bytes", 256 * kKiB, 256 * kMiB, kKiB, false,
     [](const Tuning& t) { return t.fusion_threshold(); },
     [](Tuning& t, int64_t v) { t.set_fusion_threshold(v); }},
    {"cycle_time_us", 100, 25000, 10, false,
     [](const Tuning& t) { return t.cycle_time_us(); },
     [](Tuning& t, int64_t v) { t.set_cycle_time_us(v); }},
    {"small_message_bytes", kKiB, kMiB, kKiB, false,
     [](const Tuning& t) { return t.small_message_bytes(); },
     [](Tuning& t, int64_t v) { t.set_small_message_bytes(v); }},
    {"chunk_bytes", 64 * kKiB, 16 * kMiB, 4 * kKiB, false,
     [](const Tuning& t) { return t.chunk_bytes(); },
     [](Tuning& t, int64_t v) { t.set_chunk_bytes(v); }},
    {"hierarchical_allreduce", 0, 1, 1, true,
     [](const Tuning& t) { return int64_t{t.hierarchical_allreduce()}; },
     [](Tuning& t, int64_t v) { t.set_hierarchical_allreduce(v != 0); }},
    {"hierarchical_allgather", 0, 1, 1, true,
     [](const Tuning& t) { return int64_t{t.hierarchical_allgather()}; },
     [](Tuning& t, int64_t v) { t.set_hierarchical_allgather(v != 0); }},
};

std::vector<int> FreeKnobs(const AutotuneOptions& o, bool hierarchical) {
  const bool held[kKnobCount] = {
      o.hold_fusion_threshold,
      o.hold_cycle_time,
      o.hold_small_message_bytes,
      o.hold_chunk_bytes,
      o.hold_hierarchical_allreduce || !hierarchical,
      o.hold_hierarchical_allgather || !hierarchical};
  std::vector<int> free;
  for (int k = 0; k < kKnobCount; ++k) {
    if (!held[k]) free.push_back(k);
  }
  return free;
}

BayesOptOptions OptimizerOptions(const AutotuneOptions& o, int dims) {
  BayesOptOptions b;
  b.dims = std::max(dims, 1);
  b.noise = o.noise;
  return b;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Autotuner>> Autotuner::Create(
    const AutotuneOptions& options, const Tuning& start, int size,
    bool hierarchical) {
  std::unique_ptr<Autotuner> tuner(new Autotuner(
      options, start, size, FreeKnobs(options, hierarchical)));
  if (!options.log_file.empty()) {
    tuner->log_.open(options.log_file, std::ios::out | std::ios::trunc);
    if (!tuner->log_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HVD_AUTOTUNE_LOG: cannot write ", options.log_file,
          ": give a file in a writable directory"));
    }
    std::vector<std::string> columns = {"sample", "phase"};
    for (const Knob& k : kKnobs) columns.push_back(k.column);
    columns.push_back("score_gbps");
    tuner->log_ << absl::StrJoin(columns, ",") << std::endl;
  }
  if (tuner->free_knobs_.empty()) {
    HVD_LOG(INFO) << "autotune: every tuned knob is set, nothing to tune";
    tuner->phase_ = Phase::kFrozen;
  }
  return tuner;
}

Autotuner::Autotuner(const AutotuneOptions& options, const Tuning& start,
                     int size, std::vector<int> free_knobs)
    : options_(options),
      bus_factor_(size > 1 ? 2.0 * (size - 1) / size : 1.0),
      free_knobs_(std::move(free_knobs)),
      optimizer_(OptimizerOptions(options, free_knobs_.size())),
      current_(start) {
  current_.set_frozen(false);
  if (options_.warmup_samples == 0) phase_ = Phase::kSearch;
}

std::optional<Tuning> Autotuner::Observe(const ResponseList& list,
                                         absl::Time now) {
  if (frozen()) return std::nullopt;
  for (const Response& response : list.responses()) {
    if (response.type() != ALLREDUCE || !response.error().empty()) continue;
    for (const std::string& name : response.names()) {
      if (seen_.size() >= kMaxStepNames) seen_.clear();
      if (seen_.insert(name).second) continue;
      seen_ = {name};
      if (std::optional<Tuning> change = StepEnded(now)) return change;
    }
    if (counting_) bytes_ += ResponseBytes(response);
  }
  return std::nullopt;
}

std::optional<Tuning> Autotuner::StepEnded(absl::Time now) {
  if (counting_ && ++steps_ < options_.steps_per_sample) return std::nullopt;
  std::optional<Tuning> change;
  if (counting_) {
    const double seconds = absl::ToDoubleSeconds(now - sample_start_);
    const double score =
        seconds > 0 ? bytes_ * bus_factor_ / seconds / 1e9 : 0.0;
    change = SampleDone(score);
  }
  // A change takes effect after this list: its step is not counted.
  counting_ = !change.has_value() && !frozen();
  steps_ = 0;
  bytes_ = 0;
  sample_start_ = now;
  return change;
}

std::optional<Tuning> Autotuner::SampleDone(double score) {
  if (phase_ == Phase::kWarmup) {
    Log("warmup", warmups_, current_, score);
    if (++warmups_ >= options_.warmup_samples) phase_ = Phase::kSearch;
    return std::nullopt;
  }
  Log("sample", static_cast<int>(scored_.size()), current_, score);
  scored_.emplace_back(current_, score);
  optimizer_.Add(Encode(current_), score);
  if (static_cast<int>(scored_.size()) >= options_.max_samples) {
    return Freeze();
  }
  Tuning next = Decode(optimizer_.Suggest());
  if (next.SerializeAsString() == current_.SerializeAsString()) {
    return std::nullopt;  // the same values: the next sample goes on
  }
  current_ = next;
  return current_;
}

// The sampled values the model expects most of: one lucky sample of a
// noisy machine does not win over values that scored well around it.
std::optional<Tuning> Autotuner::Freeze() {
  size_t best = 0;
  double best_mean = optimizer_.Predict(Encode(scored_[0].first)).first;
  for (size_t i = 1; i < scored_.size(); ++i) {
    const double mean = optimizer_.Predict(Encode(scored_[i].first)).first;
    if (mean > best_mean) {
      best = i;
      best_mean = mean;
    }
  }
  current_ = scored_[best].first;
  current_.set_frozen(true);
  phase_ = Phase::kFrozen;
  Log("final", static_cast<int>(scored_.size()), current_, best_mean);
  std::vector<std::string> chosen;
  for (const Knob& k : kKnobs) {
    chosen.push_back(absl::StrCat(k.column, "=", k.get(current_)));
  }
  HVD_LOG(INFO) << "autotune: frozen after " << scored_.size()
                << " samples at " << absl::StrJoin(chosen, " ") << " ("
                << best_mean << " GB/s expected)";
  return current_;
}

std::vector<double> Autotuner::Encode(const Tuning& t) const {
  std::vector<double> x;
  for (int k : free_knobs_) {
    const Knob& knob = kKnobs[k];
    if (knob.on_off) {
      x.push_back(knob.get(t) != 0 ? 1.0 : 0.0);
      continue;
    }
    const double v = std::clamp(static_cast<double>(knob.get(t)), knob.low,
                                knob.high);
    x.push_back(std::log(v / knob.low) / std::log(knob.high / knob.low));
  }
  return x;
}

Tuning Autotuner::Decode(const std::vector<double>& x) const {
  Tuning t = current_;
  for (size_t i = 0; i < free_knobs_.size(); ++i) {
    const Knob& knob = kKnobs[free_knobs_[i]];
    if (knob.on_off) {
      knob.set(t, x[i] >= 0.5 ? 1 : 0);
      continue;
    }
    const double v =
        knob.low * std::pow(knob.high / knob.low, std::clamp(x[i], 0.0, 1.0));
    knob.set(t, std::max<int64_t>(
                    knob.grain, std::llround(v / knob.grain) * knob.grain));
  }
  return t;
}

void Autotuner::Log(absl::string_view phase, int sample, const Tuning& t,
                    std::optional<double> score) {
  if (!log_.is_open()) return;
  log_ << sample << "," << phase;
  for (const Knob& k : kKnobs) log_ << "," << k.get(t);
  log_ << "," << (score ? absl::StrCat(*score) : "") << std::endl;
}

}  // namespace hvd::runtime
