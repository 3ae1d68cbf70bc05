#include "core/runtime/config.h"

#include <stdlib.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "core/common/config_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

Config Cycles(double cycle_ms, double idle_ms) {
  Config c;
  c.cycle_time = absl::Microseconds(static_cast<int64_t>(cycle_ms * 1000));
  c.idle_cycle_time = absl::Microseconds(static_cast<int64_t>(idle_ms * 1000));
  return c;
}

TEST(CycleTimeAfterTest, DoublesPerIdleCycleUpToTheIdleCycleTime) {
  const Config c = Cycles(1, 20);
  EXPECT_EQ(CycleTimeAfter(c, 0), absl::Milliseconds(1));
  EXPECT_EQ(CycleTimeAfter(c, 1), absl::Milliseconds(2));
  EXPECT_EQ(CycleTimeAfter(c, 4), absl::Milliseconds(16));
  EXPECT_EQ(CycleTimeAfter(c, 5), absl::Milliseconds(20));
  EXPECT_EQ(CycleTimeAfter(c, 1000000), absl::Milliseconds(20));
}

TEST(CycleTimeAfterTest, NoBackOffWhenTheIdleCycleTimeIsNotLonger) {
  EXPECT_EQ(CycleTimeAfter(Cycles(5, 0), 10), absl::Milliseconds(5));
  EXPECT_EQ(CycleTimeAfter(Cycles(5, 5), 10), absl::Milliseconds(5));
}

TEST(CycleTimeAfterTest, ZeroCycleTimeStaysZero) {
  EXPECT_EQ(CycleTimeAfter(Cycles(0, 20), 10), absl::ZeroDuration());
}

// A ConfigLookup over a fixed set of variables (bare names).
ConfigLookup Vars(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](absl::string_view name)
             -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string ErrorOf(std::map<std::string, std::string> vars) {
  return std::string(ParseConfig(Vars(std::move(vars))).status().message());
}

TEST(ParseConfigTest, NothingSetIsAJobOfSizeOneWithEveryDefault) {
  absl::StatusOr<Config> c = ParseConfig(Vars({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->size, 1);
  EXPECT_EQ(c->rank, 0);
  EXPECT_FALSE(c->hostname.empty());
  EXPECT_FALSE(c->log_level.has_value());
  EXPECT_EQ(c->tcp.spin, transport::TcpTuning().spin);
  EXPECT_EQ(c->shm_tuning.ring_bytes, transport::ShmTuning().ring_bytes);
  EXPECT_EQ(c->shm_tuning.slow_copy_mbps, 8000u);
  EXPECT_EQ(c->collectives.chunk_bytes,
            collectives::CollectiveOptions().chunk_bytes);
  EXPECT_TRUE(c->shm);
  EXPECT_EQ(c->gpu_data_path, GpuDataPath::kAuto);
}

TEST(ParseConfigTest, ReadsIdleCycleTimeInMilliseconds) {
  absl::StatusOr<Config> c = ParseConfig(Vars({{"IDLE_CYCLE_TIME", "7.5"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->idle_cycle_time, absl::Microseconds(7500));
}

TEST(ParseConfigTest, TransportTuningGoesToTheTransportsOptions) {
  absl::StatusOr<Config> c = ParseConfig(Vars({{"TCP_SPIN_US", "7"},
                                               {"TCP_LAZY_RECV_BYTES", "0"},
                                               {"TCP_SOCKET_BUFFER_BYTES", "0"},
                                               {"SHM_SPIN_US", "3"},
                                               {"SHM_PIECE_BYTES", "4096"},
                                               {"SHM_RING_BYTES", "65536"},
                                               {"SHM_YIELD", "off"},
                                               {"SHM_SLOW_COPY_MBPS", "0"},
                                               {"SHM", "0"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tcp.spin, absl::Microseconds(7));
  EXPECT_EQ(c->tcp.lazy_recv_bytes, 0u);
  EXPECT_EQ(c->tcp.socket_buffer_bytes, 0);
  EXPECT_EQ(c->shm_tuning.spin, absl::Microseconds(3));
  EXPECT_EQ(c->shm_tuning.piece_bytes, 4096u);
  EXPECT_EQ(c->shm_tuning.ring_bytes, 65536u);
  EXPECT_FALSE(c->shm_tuning.yield);
  EXPECT_EQ(c->shm_tuning.slow_copy_mbps, 0u);
  EXPECT_FALSE(c->shm);
}

TEST(ParseConfigTest, CollectiveTunablesGoToTheCollectivesOptions) {
  absl::StatusOr<Config> c =
      ParseConfig(Vars({{"ALLREDUCE_ALGORITHM", "Ring"},
                        {"SMALL_MESSAGE_BYTES", "100"},
                        {"CROSS_HOST_SMALL_MESSAGE_BYTES", "50"},
                        {"CHUNK_BYTES", "4096"},
                        {"STREAMING_STORE_BYTES", "0"},
                        {"HIERARCHICAL_ALLGATHER", "1"},
                        {"FUSION_IN_PLACE_BYTES", "0"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->collectives.algorithm, collectives::AllreduceAlgorithm::kRing);
  EXPECT_EQ(c->collectives.small_message_bytes, 100u);
  EXPECT_EQ(c->collectives.cross_host_small_message_bytes, 50u);
  EXPECT_EQ(c->collectives.chunk_bytes, 4096u);
  EXPECT_EQ(c->collectives.streaming_store_bytes, 0u);
  EXPECT_TRUE(c->collectives.hierarchical_allgather);
  EXPECT_EQ(c->fusion_in_place_bytes, 0);
}

TEST(ParseConfigTest, AutotuneHoldsTheKnobsTheUserSet) {
  absl::StatusOr<Config> c =
      ParseConfig(Vars({{"AUTOTUNE", "1"},
                        {"AUTOTUNE_LOG", "/tmp/tune.csv"},
                        {"AUTOTUNE_WARMUP_SAMPLES", "0"},
                        {"AUTOTUNE_STEPS_PER_SAMPLE", "5"},
                        {"AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "12"},
                        {"AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.25"},
                        {"FUSION_THRESHOLD", "1048576"},
                        {"CHUNK_BYTES", "65536"},
                        {"HIERARCHICAL_ALLGATHER", "0"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  const AutotuneOptions& a = c->autotune;
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.log_file, "/tmp/tune.csv");
  EXPECT_EQ(a.warmup_samples, 0);
  EXPECT_EQ(a.steps_per_sample, 5);
  EXPECT_EQ(a.max_samples, 12);
  EXPECT_EQ(a.noise, 0.25);
  EXPECT_TRUE(a.hold_fusion_threshold);
  EXPECT_TRUE(a.hold_chunk_bytes);
  EXPECT_FALSE(a.hold_cycle_time);
  EXPECT_FALSE(a.hold_small_message_bytes);
  EXPECT_TRUE(a.hold_hierarchical_allgather);
  EXPECT_FALSE(a.hold_hierarchical_allreduce);
  // Held off: what was set is where tuning starts.
  c = ParseConfig(Vars({{"AUTOTUNE", "1"},
                        {"AUTOTUNE_HOLD_SET", "0"},
                        {"FUSION_THRESHOLD", "1048576"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->autotune.hold_fusion_threshold);
  EXPECT_EQ(c->fusion_threshold, 1048576);
  EXPECT_EQ(ErrorOf({{"AUTOTUNE_STEPS_PER_SAMPLE", "0"}}),
            "HVD_AUTOTUNE_STEPS_PER_SAMPLE='0' is not valid: expected an "
            "integer >= 1");
  EXPECT_EQ(ErrorOf({{"AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "-1"}}),
            "HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE='-1' is not valid: expected "
            "a number from 0 to 10");
}

TEST(ParseConfigTest, GpuDataPathAcceptsTheThreeNamesInAnyCase) {
  for (auto [text, path] : {std::pair{"", GpuDataPath::kAuto},
                            {"auto", GpuDataPath::kAuto},
                            {"NCCL", GpuDataPath::kNccl},
                            {"Staged", GpuDataPath::kStaged}}) {
    absl::StatusOr<Config> c = ParseConfig(Vars({{"GPU_DATA_PATH", text}}));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->gpu_data_path, path) << text;
  }
}

TEST(ParseConfigTest, TransportAndRdmaProviderAreRead) {
  absl::StatusOr<Config> c = ParseConfig(
      Vars({{"TRANSPORT", "RDMA"}, {"RDMA_PROVIDER", "verbs"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->transport, Transport::kRdma);
  EXPECT_EQ(c->rdma_provider, "verbs");
  EXPECT_EQ(ParseConfig(Vars({}))->transport, Transport::kAuto);
}

TEST(ParseConfigTest, RendezvousCaIsPemTextOrAFileHoldingIt) {
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  absl::StatusOr<Config> c = ParseConfig(
      Vars({{"RENDEZVOUS_CA", pem}, {"RENDEZVOUS_TLS_NAME", "rdzv.svc"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rendezvous_ca_pem, pem);
  EXPECT_EQ(c->rendezvous_tls_name, "rdzv.svc");
  EXPECT_TRUE(ParseConfig(Vars({}))->rendezvous_ca_pem.empty());
  EXPECT_THAT(ErrorOf({{"RENDEZVOUS_CA", "/nonexistent/ca.pem"}}),
              ::testing::StartsWith("HVD_RENDEZVOUS_CA: cannot read CA "
                                    "certificate file '/nonexistent/ca.pem'"));
}

TEST(ParseConfigTest, UnknownTransportNamesTheVariable) {
  EXPECT_THAT(ErrorOf({{"TRANSPORT", "ib"}}),
              ::testing::StartsWith("HVD_TRANSPORT='ib' is not valid"));
}

TEST(ParseConfigTest, LogLevelIsSetOnlyWhenGiven) {
  absl::StatusOr<Config> c = ParseConfig(Vars({{"LOG_LEVEL", "Info"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_level, LogLevel::kInfo);
  EXPECT_FALSE(c->log_hide_time);
  EXPECT_TRUE(ParseConfig(Vars({{"LOG_HIDE_TIME", "1"}}))->log_hide_time);
}

TEST(ParseConfigTest, StallCheckDisableWinsOverTheCheckTime) {
  absl::StatusOr<Config> c = ParseConfig(Vars(
      {{"STALL_CHECK_TIME_SECONDS", "5"}, {"STALL_CHECK_DISABLE", "yes"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->stall_check_time, absl::ZeroDuration());
}

// One policy for every variable: init fails naming it, its text, and what
// it accepts.
TEST(ParseConfigTest, BadValuesNameTheVariableAndWhatItAccepts) {
  EXPECT_EQ(ErrorOf({{"FUSION_THRESHOLD", "64MB"}}),
            "HVD_FUSION_THRESHOLD='64MB' is not valid: expected an integer "
            ">= 0");
  EXPECT_EQ(ErrorOf({{"IDLE_CYCLE_TIME", "-1"}}),
            "HVD_IDLE_CYCLE_TIME='-1' is not valid: expected a number of "
            "milliseconds >= 0");
  EXPECT_EQ(ErrorOf({{"SIZE", "4294967296"}}),
            "HVD_SIZE='4294967296' is not valid: expected an integer from 1 "
            "to 2147483647");
  EXPECT_EQ(ErrorOf({{"TIMEOUT_SECONDS", "0"}}),
            "HVD_TIMEOUT_SECONDS='0' is not valid: expected a number of "
            "seconds > 0");
  EXPECT_EQ(ErrorOf({{"START_TIMEOUT", "-1"}}),
            "HVD_START_TIMEOUT='-1' is not valid: expected a number of "
            "seconds > 0");
  EXPECT_EQ(ErrorOf({{"TCP_SPIN_US", "fast"}}),
            "HVD_TCP_SPIN_US='fast' is not valid: expected a number of "
            "microseconds >= 0");
  EXPECT_EQ(ErrorOf({{"SHM_RING_BYTES", "0"}}),
            "HVD_SHM_RING_BYTES='0' is not valid: expected an integer >= 1");
  EXPECT_EQ(ErrorOf({{"SHM", "maybe"}}),
            "HVD_SHM='maybe' is not valid: expected a boolean (1/0, "
            "true/false, yes/no, on/off)");
  EXPECT_EQ(ErrorOf({{"ALLREDUCE_ALGORITHM", "tree"}}),
            "HVD_ALLREDUCE_ALGORITHM='tree' is not valid: expected one of "
            "auto, ring, direct, hierarchical, recursive_doubling");
  EXPECT_EQ(ErrorOf({{"GPU_DATA_PATH", "mpi"}}),
            "HVD_GPU_DATA_PATH='mpi' is not valid: expected one of auto, "
            "nccl, staged");
  EXPECT_EQ(ErrorOf({{"LOG_LEVEL", "loud"}}),
            "HVD_LOG_LEVEL='loud' is not valid: expected trace, debug, info, "
            "warning, error or fatal");
}

TEST(ParseConfigTest, InconsistentIdentityIsRefused) {
  EXPECT_EQ(ErrorOf({{"RANK", "2"}, {"SIZE", "2"}}),
            "HVD_RANK=2 and HVD_SIZE=2 are inconsistent: need 0 <= rank < "
            "size");
  EXPECT_EQ(ErrorOf({{"RANK", "1"}, {"SIZE", "2"}}),
            "HVD_SIZE=2 but HVD_RENDEZVOUS_ADDR is not set: start the job "
            "with hvdrun, or point the workers at a rendezvous server");
}

TEST(ParseConfigTest, ElasticWorkerIdMakesTheJobElastic) {
  absl::StatusOr<Config> plain = ParseConfig(Vars({}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->elastic());
  absl::StatusOr<Config> c = ParseConfig(Vars(
      {{"ELASTIC_WORKER_ID", "h1:0"}, {"RENDEZVOUS_ADDR", "10.0.0.1:29500"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->elastic());
  EXPECT_EQ(c->elastic_worker_id, "h1:0");
}

// The launch-time identity is replaced by each round's: an elastic worker
// needs none, and one that does not add up is not an error.
TEST(ParseConfigTest, ElasticWorkerNeedsNoConsistentIdentity) {
  absl::StatusOr<Config> c = ParseConfig(
      Vars({{"ELASTIC_WORKER_ID", "h1:0"},
            {"RENDEZVOUS_ADDR", "10.0.0.1:29500"},
            {"RANK", "3"},
            {"SIZE", "2"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->elastic());
}

TEST(ParseConfigTest, ElasticWorkerWithoutRendezvousIsRefused) {
  EXPECT_EQ(ErrorOf({{"ELASTIC_WORKER_ID", "h1:0"}}),
            "HVD_ELASTIC_WORKER_ID is set but HVD_RENDEZVOUS_ADDR is not: an "
            "elastic worker joins each round of its job at the rendezvous; "
            "start the job with hvdrun");
}

TEST(ParseConfigTest, EmptyElasticWorkerIdIsNotElastic) {
  absl::StatusOr<Config> c = ParseConfig(Vars({{"ELASTIC_WORKER_ID", ""}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->elastic());
}

// Every variable the core reads is named once, in config_names.h; a typo in
// a name read here would leave its variable silently unread.
TEST(ParseConfigTest, ReadsEveryVariableByItsSharedName) {
  std::set<std::string> asked;
  ConfigLookup recorder = [&](absl::string_view name) {
    asked.insert(std::string(name));
    return std::optional<std::string>();
  };
  ASSERT_TRUE(ParseConfig(recorder).ok());
  namespace n = config_names;
  for (const char* name :
       {n::kRank, n::kSize, n::kLocalRank, n::kLocalSize, n::kCrossRank,
        n::kCrossSize, n::kHostname, n::kRendezvousAddr, n::kJobToken,
        n::kRendezvousCa, n::kRendezvousTlsName,
        n::kIface, n::kElasticWorkerId, n::kFusionThreshold, n::kCycleTime,
        n::kCacheCapacity,
        n::kTimeline, n::kStallCheckDisable, n::kStallCheckTimeSeconds,
        n::kStallShutdownTimeSeconds, n::kHierarchicalAllreduce, n::kLogLevel,
        n::kLogHideTime, n::kHierarchicalAllgather, n::kIdleCycleTime, n::kTimelineMarkCycles, n::kTimeoutSeconds,
        n::kStartTimeout, n::kBackgroundSpinUs, n::kWaitSpinUs,
        n::kCallerProgress, n::kCachedExchange,
        n::kFusionInPlaceBytes, n::kAllreduceAlgorithm, n::kSmallMessageBytes,
        n::kCrossHostSmallMessageBytes, n::kChunkBytes, n::kRingSegmentBytes,
        n::kStreamingStoreBytes, n::kShm,
        n::kTcpSpinUs, n::kTcpLazyRecvBytes, n::kTcpSocketBufferBytes,
        n::kShmSpinUs, n::kShmPieceBytes, n::kShmRingBytes, n::kShmYield,
        n::kGpuDataPath}) {
    EXPECT_TRUE(asked.count(name)) << name;
  }
}

TEST(ConfigFromEnvTest, ElasticWorkerIdInEitherSpelling) {
  setenv("HOROVOD_RENDEZVOUS_ADDR", "127.0.0.1:1", 1);
  setenv("HOROVOD_ELASTIC_WORKER_ID", "h2:1", 1);
  EXPECT_EQ(ConfigFromEnv()->elastic_worker_id, "h2:1");
  setenv("HVD_ELASTIC_WORKER_ID", "h3:0", 1);
  EXPECT_EQ(ConfigFromEnv()->elastic_worker_id, "h3:0");
  unsetenv("HVD_ELASTIC_WORKER_ID");
  unsetenv("HOROVOD_ELASTIC_WORKER_ID");
  unsetenv("HOROVOD_RENDEZVOUS_ADDR");
  EXPECT_FALSE(ConfigFromEnv()->elastic());
}

TEST(ConfigFromEnvTest, ReadsBothSpellingsHvdFirst) {
  setenv("HOROVOD_CACHE_CAPACITY", "7", 1);
  EXPECT_EQ(ConfigFromEnv()->cache_capacity, 7);
  setenv("HVD_CACHE_CAPACITY", "3", 1);
  EXPECT_EQ(ConfigFromEnv()->cache_capacity, 3);
  unsetenv("HVD_CACHE_CAPACITY");
  unsetenv("HOROVOD_CACHE_CAPACITY");
  EXPECT_EQ(ConfigFromEnv()->cache_capacity, 1024);
}

}  // namespace
}  // namespace hvd::runtime
