#include "core/runtime/config.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/config_names.h"
#include "core/common/env.h"
#include "core/rendezvous/tls.h"

namespace hvd::runtime {
namespace {

namespace names = config_names;

std::string LocalHostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// Reads variables one by one into their fields, leaving a field at its
// default when the variable is unset; keeps the first error, after which
// every read is a no-op.
class Reader {
 public:
  explicit Reader(const ConfigLookup& lookup) : lookup_(lookup) {}

  const absl::Status& status() const { return status_; }
  void Fail(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }

  bool IsSet(const char* name) { return Text(name).has_value(); }

  void String(const char* name, std::string* out) {
    if (auto text = Text(name)) *out = *text;
  }

  // A CA certificate: PEM text, or a file holding it.
  void Ca(const char* name, std::string* pem) {
    auto text = Text(name);
    if (!text || text->empty()) return;
    absl::StatusOr<std::string> read = rendezvous::PemOrFile(*text);
    if (read.ok()) {
      *pem = *std::move(read);
    } else {
      Fail(absl::InvalidArgumentError(absl::StrCat(
          names::kPrefix, name, ": ", read.status().message(),
          ": expected a PEM certificate or a file holding one")));
    }
  }

  // A whole number >= `min` that fits `T`.
  template <typename T>
  void Integer(const char* name, int64_t min, T* out) {
    auto text = Text(name);
    if (!text) return;
    const uint64_t max = std::min<uint64_t>(std::numeric_limits<T>::max(),
                                            std::numeric_limits<int64_t>::max());
    int64_t value;
    if (!absl::SimpleAtoi(*text, &value) || value < min) {
      Bad(name, *text, absl::StrCat("an integer >= ", min));
    } else if (static_cast<uint64_t>(value) > max) {
      Bad(name, *text, absl::StrCat("an integer from ", min, " to ", max));
    } else {
      *out = static_cast<T>(value);
    }
  }

  // A number of `unit`s (fractions allowed, kept to a thousandth): >= 0, or
  // > 0 where a zero would make every wait fail at once.
  enum Sign { kNonNegative, kPositive };
  void Duration(const char* name, absl::Duration unit, const char* unit_name,
                absl::Duration* out, Sign sign = kNonNegative) {
    auto text = Text(name);
    if (!text) return;
    double value;
    const absl::Duration grain = unit / 1000;
    if (!absl::SimpleAtod(*text, &value) || !(value >= 0) ||
        (sign == kPositive && static_cast<int64_t>(value * 1000) <= 0)) {
      Bad(name, *text,
          absl::StrCat("a number of ", unit_name,
                       sign == kPositive ? " > 0" : " >= 0"));
      return;
    }
    *out = static_cast<int64_t>(value * 1000) * grain;
  }

  // 1/0, true/false, yes/no, on/off (any case); empty is false.
  void Bool(const char* name, bool* out) {
    auto text = Text(name);
    if (!text) return;
    const std::string v = absl::AsciiStrToLower(*text);
    if (v == "1" || v == "true" || v == "yes" || v == "on") {
      *out = true;
    } else if (v == "0" || v == "false" || v == "no" || v == "off" ||
               v.empty()) {
      *out = false;
    } else {
      Bad(name, *text, "a boolean (1/0, true/false, yes/no, on/off)");
    }
  }

  // Whatever `parse(text, out)` accepts (`accepts` says what that is, for
  // the error). True when set and valid; empty text keeps the default.
  template <typename T, typename Parse>
  bool Parsed(const char* name, Parse parse, absl::string_view accepts,
              T* out) {
    auto text = Text(name);
    if (!text || text->empty()) return false;
    if (parse(*text, out)) return true;
    Bad(name, *text, accepts);
    return false;
  }

  // One of `choices`' names (any case). True when set to one of them.
  template <typename T>
  bool Choice(const char* name,
              std::initializer_list<std::pair<const char*, T>> choices,
              T* out) {
    auto text = Text(name);
    if (!text || text->empty()) return false;  // empty: the default
    const std::string lower = absl::AsciiStrToLower(*text);
    std::vector<std::string> accepted;
    for (const auto& [choice, value] : choices) {
      if (lower == choice) {
        *out = value;
        return true;
      }
      accepted.push_back(choice);
    }
    Bad(name, *text, absl::StrCat("one of ", absl::StrJoin(accepted, ", ")));
    return false;
  }

 private:
  std::optional<std::string> Text(const char* name) {
    if (!status_.ok()) return std::nullopt;
    return lookup_(name);
  }
  void Bad(const char* name, absl::string_view text,
           absl::string_view accepts) {
    Fail(absl::InvalidArgumentError(absl::StrCat(
        names::kPrefix, name, "='", text, "' is not valid: expected ",
        accepts)));
  }

  const ConfigLookup& lookup_;
  absl::Status status_;
};

// The identity the launch contract gives, as defaults for HVD_*.
void TakeContract(const LaunchContract& k, Config& c) {
  c.launched_by = k.name;
  c.rank = k.rank.value_or(0);
  c.size = k.size.value_or(1);
  c.local_rank = k.local_rank.value_or(0);
  c.local_size = k.local_size.value_or(1);
  // Hosts of equal size unless the contract says otherwise.
  const bool even = c.local_size > 0 && c.size % c.local_size == 0;
  c.cross_rank = k.cross_rank.value_or(even ? c.rank / c.local_size : 0);
  c.cross_size = k.cross_size.value_or(even ? c.size / c.local_size : 1);
  c.job_id = k.job_id;
  c.rank_hosts = k.rank_hosts;
}

// Without HVD_RENDEZVOUS_ADDR: where the contract's ranks meet.
void MeetByContract(Reader& r, const LaunchContract& k, Config& c) {
  if (k.pmix) {
    c.rendezvous_over_pmix = true;
  } else if (!k.rendezvous_host.empty() && k.rendezvous_port > 0) {
    c.rendezvous_addr = absl::StrCat(k.rendezvous_host, ":",
                                     k.rendezvous_port);
    c.serve_rendezvous = c.rank == 0;
  } else {
    r.Fail(absl::InvalidArgumentError(absl::StrCat(
        k.name, " gives this process rank ", c.rank,
        " but no place to meet rank 0: set MASTER_ADDR and MASTER_PORT (rank "
        "0 serves the rendezvous there), or HVD_RENDEZVOUS_ADDR")));
  }
}

void ReadIdentity(Reader& r, const EnvLookup& env, Config& c) {
  LaunchContract contract;
  // hvdrun's workers (and elastic ones) have their identity already: the
  // variables of whatever started hvdrun are not theirs.
  const bool given = (r.IsSet(names::kRank) && r.IsSet(names::kSize)) ||
                     r.IsSet(names::kElasticWorkerId);
  if (env && !given) {
    absl::StatusOr<LaunchContract> detected = DetectLaunchContract(env);
    if (!detected.ok()) return r.Fail(detected.status());
    contract = *std::move(detected);
  }
  const bool by_contract = contract.kind != ContractKind::kNone;
  if (by_contract) {
    TakeContract(contract, c);
    if (auto home = env("HOME"); home && !home->empty()) {
      c.secret_file = *home + "/.hvd/secret";
    }
  }
  if (contract.kind == ContractKind::kIndexedJob && !r.IsSet(names::kSize)) {
    return r.Fail(absl::InvalidArgumentError(
        "JOB_COMPLETION_INDEX gives the rank but not the size: set HVD_SIZE "
        "to the Job's completions"));
  }
  r.Integer(names::kRank, 0, &c.rank);
  r.Integer(names::kSize, 1, &c.size);
  if (!by_contract) {
    c.local_rank = c.rank;
    c.local_size = c.size;
  }
  r.Integer(names::kLocalRank, 0, &c.local_rank);
  r.Integer(names::kLocalSize, 1, &c.local_size);
  r.Integer(names::kCrossRank, 0, &c.cross_rank);
  r.Integer(names::kCrossSize, 1, &c.cross_size);
  c.hostname = LocalHostname();
  r.String(names::kHostname, &c.hostname);
  r.String(names::kRendezvousAddr, &c.rendezvous_addr);
  r.String(names::kJobToken, &c.token);
  r.Ca(names::kRendezvousCa, &c.rendezvous_ca_pem);
  r.String(names::kRendezvousTlsName, &c.rendezvous_tls_name);
  r.String(names::kIface, &c.iface);
  r.String(names::kElasticWorkerId, &c.elastic_worker_id);
  if (!r.status().ok()) return;
  if (by_contract && c.rendezvous_addr.empty() && c.size > 1) {
    MeetByContract(r, contract, c);
  }
  if (c.elastic()) {
    if (c.rendezvous_addr.empty()) {
      r.Fail(absl::InvalidArgumentError(absl::StrCat(
          names::kPrefix, names::kElasticWorkerId, " is set but ",
          names::kPrefix, names::kRendezvousAddr,
          " is not: an elastic worker joins each round of its job at the "
          "rendezvous; start the job with hvdrun")));
    }
    return;
  }
  if (c.rank >= c.size) {
    r.Fail(absl::InvalidArgumentError(absl::StrCat(
        "HVD_RANK=", c.rank, " and HVD_SIZE=", c.size,
        " are inconsistent: need 0 <= rank < size")));
  } else if (c.local_rank >= c.local_size) {
    r.Fail(absl::InvalidArgumentError(absl::StrCat(
        "HVD_LOCAL_RANK=", c.local_rank, " and HVD_LOCAL_SIZE=", c.local_size,
        " are inconsistent")));
  } else if (c.size > 1 && c.rendezvous_addr.empty() &&
             !c.rendezvous_over_pmix) {
    r.Fail(absl::InvalidArgumentError(absl::StrCat(
        "HVD_SIZE=", c.size,
        " but HVD_RENDEZVOUS_ADDR is not set: start the job with hvdrun, or "
        "point the workers at a rendezvous server")));
  }
}

void ReadNegotiation(Reader& r, Config& c) {
  const absl::Duration ms = absl::Milliseconds(1), s = absl::Seconds(1);
  r.Duration(names::kCycleTime, ms, "milliseconds", &c.cycle_time);
  r.Duration(names::kIdleCycleTime, ms, "milliseconds", &c.idle_cycle_time);
  r.Integer(names::kNegotiationFanout, 1, &c.negotiation_fanout);
  r.Integer(names::kFusionThreshold, 0, &c.fusion_threshold);
  r.Integer(names::kFusionInPlaceBytes, 0, &c.fusion_in_place_bytes);
  r.Integer(names::kCacheCapacity, 0, &c.cache_capacity);
  r.String(names::kTimeline, &c.timeline_path);
  r.Bool(names::kTimelineMarkCycles, &c.timeline_mark_cycles);
  r.Duration(names::kStallCheckTimeSeconds, s, "seconds", &c.stall_check_time);
  bool stall_check_disable = false;
  r.Bool(names::kStallCheckDisable, &stall_check_disable);
  if (stall_check_disable) c.stall_check_time = absl::ZeroDuration();
  r.Duration(names::kStallShutdownTimeSeconds, s, "seconds",
             &c.stall_shutdown_time);
  r.Duration(names::kMetricsInterval, s, "seconds", &c.metrics_interval);
  r.Duration(names::kTimeoutSeconds, s, "seconds", &c.timeout,
             Reader::kPositive);
  r.Duration(names::kStartTimeout, s, "seconds", &c.start_timeout,
             Reader::kPositive);
  const absl::Duration us = absl::Microseconds(1);
  r.Duration(names::kBackgroundSpinUs, us, "microseconds", &c.background_spin);
  r.Duration(names::kWaitSpinUs, us, "microseconds", &c.wait_spin);
  r.Duration(names::kSubmitSettleUs, us, "microseconds", &c.submit_settle);
  r.Bool(names::kCallerProgress, &c.caller_progress);
  r.Bool(names::kCachedExchange, &c.cached_exchange);
  LogLevel level;
  if (r.Parsed(names::kLogLevel, ParseLogLevel,
               "trace, debug, info, warning, error or fatal", &level)) {
    c.log_level = level;
  }
  r.Bool(names::kLogHideTime, &c.log_hide_time);
}

void ReadDataPlane(Reader& r, Config& c) {
  using A = collectives::AllreduceAlgorithm;
  r.Choice<A>(names::kAllreduceAlgorithm,
              {{"auto", A::kAuto}, {"ring", A::kRing}, {"direct", A::kDirect},
               {"hierarchical", A::kHierarchical},
               {"recursive_doubling", A::kRecursiveDoubling}},
              &c.collectives.algorithm);
  r.Integer(names::kSmallMessageBytes, 0, &c.collectives.small_message_bytes);
  r.Integer(names::kCrossHostSmallMessageBytes, 0,
            &c.collectives.cross_host_small_message_bytes);
  r.Integer(names::kChunkBytes, 1, &c.collectives.chunk_bytes);
  r.Integer(names::kRingSegmentBytes, 0, &c.collectives.ring_segment_bytes);
  r.Integer(names::kStreamingStoreBytes, 0,
            &c.collectives.streaming_store_bytes);
  r.Bool(names::kShm, &c.shm);
  const absl::Duration us = absl::Microseconds(1);
  r.Duration(names::kTcpSpinUs, us, "microseconds", &c.tcp.spin);
  r.Integer(names::kTcpLazyRecvBytes, 0, &c.tcp.lazy_recv_bytes);
  r.Integer(names::kTcpSocketBufferBytes, 0, &c.tcp.socket_buffer_bytes);
  r.Duration(names::kShmSpinUs, us, "microseconds", &c.shm_tuning.spin);
  r.Integer(names::kShmPieceBytes, 1, &c.shm_tuning.piece_bytes);
  r.Integer(names::kShmRingBytes, 1, &c.shm_tuning.ring_bytes);
  r.Bool(names::kShmYield, &c.shm_tuning.yield);
  r.Integer(names::kShmSlowCopyMbps, 0, &c.shm_tuning.slow_copy_mbps);
  using P = GpuDataPath;
  r.Choice<P>(names::kGpuDataPath,
              {{"auto", P::kAuto}, {"nccl", P::kNccl}, {"staged", P::kStaged}},
              &c.gpu_data_path);
  using T = Transport;
  r.Choice<T>(names::kTransport,
              {{"auto", T::kAuto}, {"rdma", T::kRdma}, {"tcp", T::kTcp}},
              &c.transport);
  r.String(names::kRdmaProvider, &c.rdma_provider);
  r.Bool(names::kHierarchicalAllreduce, &c.hierarchical_allreduce);
  r.Bool(names::kHierarchicalAllgather,
         &c.collectives.hierarchical_allgather);
}

void ReadAutotune(Reader& r, Config& c) {
  AutotuneOptions& a = c.autotune;
  r.Bool(names::kAutotune, &a.enabled);
  r.String(names::kAutotuneLog, &a.log_file);
  r.Integer(names::kAutotuneWarmupSamples, 0, &a.warmup_samples);
  r.Integer(names::kAutotuneStepsPerSample, 1, &a.steps_per_sample);
  r.Integer(names::kAutotuneMaxSamples, 1, &a.max_samples);
  r.Parsed(
      names::kAutotuneNoise,
      [](absl::string_view text, double* out) {
        return absl::SimpleAtod(text, out) && *out >= 0 && *out <= 10;
      },
      "a number from 0 to 10", &a.noise);
  bool hold = true;
  r.Bool(names::kAutotuneHoldSet, &hold);
  if (!hold) return;
  a.hold_fusion_threshold = r.IsSet(names::kFusionThreshold);
  a.hold_cycle_time = r.IsSet(names::kCycleTime);
  a.hold_small_message_bytes = r.IsSet(names::kSmallMessageBytes);
  a.hold_chunk_bytes = r.IsSet(names::kChunkBytes);
  a.hold_hierarchical_allreduce = r.IsSet(names::kHierarchicalAllreduce);
  a.hold_hierarchical_allgather = r.IsSet(names::kHierarchicalAllgather);
}

}  // namespace

absl::Duration CycleTimeAfter(const Config& config, int idle_cycles) {
  absl::Duration wait = config.cycle_time;
  if (wait <= absl::ZeroDuration()) return wait;  // doubling leaves it at 0
  for (int i = 0; i < idle_cycles && wait < config.idle_cycle_time; ++i) {
    wait = std::min(wait * 2, config.idle_cycle_time);
  }
  return wait;
}

absl::StatusOr<Config> ParseConfig(const ConfigLookup& lookup,
                                   const EnvLookup& env) {
  Config c;
  Reader reader(lookup);
  ReadIdentity(reader, env, c);
  ReadNegotiation(reader, c);
  ReadDataPlane(reader, c);
  ReadAutotune(reader, c);
  if (!reader.status().ok()) return reader.status();
  return c;
}

absl::StatusOr<Config> ConfigFromEnv() {
  return ParseConfig(GetConfig, GetForeignEnv);
}

}  // namespace hvd::runtime
