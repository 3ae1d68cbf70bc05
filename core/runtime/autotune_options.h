// What the autotuner is told (HVD_AUTOTUNE_*, as Horovod's
// HOROVOD_AUTOTUNE_*): plain data, parsed with the rest of the Config.
#ifndef HVD_CORE_RUNTIME_AUTOTUNE_OPTIONS_H_
#define HVD_CORE_RUNTIME_AUTOTUNE_OPTIONS_H_

#include <string>

namespace hvd::runtime {

struct AutotuneOptions {
  bool enabled = false;       // HVD_AUTOTUNE
  std::string log_file;       // HVD_AUTOTUNE_LOG: one CSV line per sample
  int warmup_samples = 3;     // HVD_AUTOTUNE_WARMUP_SAMPLES: discarded
  int steps_per_sample = 10;  // HVD_AUTOTUNE_STEPS_PER_SAMPLE
  // HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES: samples scored before the values
  // are frozen.
  int max_samples = 20;
  // HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE: added to the Gaussian process'
  // kernel diagonal (scores normalised to mean 0, deviation 1).
  double noise = 0.8;
  // The knobs whose variable the user set: held at the value set. With
  // HVD_AUTOTUNE_HOLD_SET=0 none is held, and what was set is only where
  // tuning starts.
  bool hold_fusion_threshold = false;
  bool hold_cycle_time = false;
  bool hold_small_message_bytes = false;
  bool hold_chunk_bytes = false;
  bool hold_hierarchical_allreduce = false;
  bool hold_hierarchical_allgather = false;
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_AUTOTUNE_OPTIONS_H_
