// The names of hvd's environment variables, written once: the launcher sets
// them for its workers (launcher/environment.cc) and the core reads them at
// init (core/runtime/config.cc). Each name is read as HVD_<name> and, so that
// Horovod job scripts keep working, as HOROVOD_<name>; HVD_ wins when both
// are set.
#ifndef HVD_CORE_COMMON_CONFIG_NAMES_H_
#define HVD_CORE_COMMON_CONFIG_NAMES_H_

namespace hvd::config_names {

inline constexpr char kPrefix[] = "HVD_";
inline constexpr char kHorovodPrefix[] = "HOROVOD_";

// A worker's identity: set by hvdrun's agents (or an orchestrator).
inline constexpr char kRank[] = "RANK";
inline constexpr char kSize[] = "SIZE";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kLocalSize[] = "LOCAL_SIZE";
inline constexpr char kCrossRank[] = "CROSS_RANK";
inline constexpr char kCrossSize[] = "CROSS_SIZE";
inline constexpr char kHostname[] = "HOSTNAME";
inline constexpr char kRendezvousAddr[] = "RENDEZVOUS_ADDR";
inline constexpr char kJobToken[] = "JOB_TOKEN";  // a secret: never logged
// TLS to the rendezvous: the CA certificate (PEM text, or a file holding it)
// and the name the server's certificate carries (default: the host dialled).
inline constexpr char kRendezvousCa[] = "RENDEZVOUS_CA";
inline constexpr char kRendezvousTlsName[] = "RENDEZVOUS_TLS_NAME";
inline constexpr char kIface[] = "IFACE";
// An elastic job's worker: the id hvdrun gave this process, which stays the
// same while its rank changes from round to round (proto/elastic.proto).
inline constexpr char kElasticWorkerId[] = "ELASTIC_WORKER_ID";
// hvdrun's --elastic-timeout when the flag is not given (seconds).
inline constexpr char kElasticTimeout[] = "ELASTIC_TIMEOUT";

// Tunables that hvdrun's flags set.
inline constexpr char kFusionThreshold[] = "FUSION_THRESHOLD";
inline constexpr char kCycleTime[] = "CYCLE_TIME";
inline constexpr char kCacheCapacity[] = "CACHE_CAPACITY";
inline constexpr char kTimeline[] = "TIMELINE";
inline constexpr char kStallCheckDisable[] = "STALL_CHECK_DISABLE";
inline constexpr char kStallCheckTimeSeconds[] = "STALL_CHECK_TIME_SECONDS";
inline constexpr char kStallShutdownTimeSeconds[] =
    "STALL_SHUTDOWN_TIME_SECONDS";
// Seconds between a worker's metrics reports to hvdrun (--metrics-port);
// 0: none.
inline constexpr char kMetricsInterval[] = "METRICS_INTERVAL";
// The rendezvous store key of a rank's report: this, then the rank.
inline constexpr char kMetricsKeyPrefix[] = "metrics/";
inline constexpr char kHierarchicalAllreduce[] = "HIERARCHICAL_ALLREDUCE";
inline constexpr char kHierarchicalAllgather[] = "HIERARCHICAL_ALLGATHER";
inline constexpr char kLogLevel[] = "LOG_LEVEL";
inline constexpr char kLogHideTime[] = "LOG_HIDE_TIME";
inline constexpr char kTransport[] = "TRANSPORT";

inline constexpr char kTimelineMarkCycles[] = "TIMELINE_MARK_CYCLES";
inline constexpr char kTimeoutSeconds[] = "TIMEOUT_SECONDS";

// The autotuner (hvdrun --autotune and --autotune-*).
inline constexpr char kAutotune[] = "AUTOTUNE";
inline constexpr char kAutotuneLog[] = "AUTOTUNE_LOG";
inline constexpr char kAutotuneWarmupSamples[] = "AUTOTUNE_WARMUP_SAMPLES";
inline constexpr char kAutotuneStepsPerSample[] = "AUTOTUNE_STEPS_PER_SAMPLE";
inline constexpr char kAutotuneMaxSamples[] = "AUTOTUNE_BAYES_OPT_MAX_SAMPLES";
inline constexpr char kAutotuneNoise[] = "AUTOTUNE_GAUSSIAN_PROCESS_NOISE";
// 0: values set for tuned knobs are where tuning starts, not held fixed.
inline constexpr char kAutotuneHoldSet[] = "AUTOTUNE_HOLD_SET";

// Tunables read by workers only.
inline constexpr char kIdleCycleTime[] = "IDLE_CYCLE_TIME";
inline constexpr char kNegotiationFanout[] = "NEGOTIATION_FANOUT";
inline constexpr char kStartTimeout[] = "START_TIMEOUT";
inline constexpr char kBackgroundSpinUs[] = "BACKGROUND_SPIN_US";
inline constexpr char kWaitSpinUs[] = "WAIT_SPIN_US";
inline constexpr char kSubmitSettleUs[] = "SUBMIT_SETTLE_US";
inline constexpr char kCallerProgress[] = "CALLER_PROGRESS";
inline constexpr char kCachedExchange[] = "CACHED_EXCHANGE";
inline constexpr char kFusionInPlaceBytes[] = "FUSION_IN_PLACE_BYTES";
inline constexpr char kAllreduceAlgorithm[] = "ALLREDUCE_ALGORITHM";
inline constexpr char kSmallMessageBytes[] = "SMALL_MESSAGE_BYTES";
inline constexpr char kCrossHostSmallMessageBytes[] =
    "CROSS_HOST_SMALL_MESSAGE_BYTES";
inline constexpr char kChunkBytes[] = "CHUNK_BYTES";
inline constexpr char kRingSegmentBytes[] = "RING_SEGMENT_BYTES";
inline constexpr char kStreamingStoreBytes[] = "STREAMING_STORE_BYTES";
inline constexpr char kShm[] = "SHM";
inline constexpr char kTcpSpinUs[] = "TCP_SPIN_US";
inline constexpr char kTcpLazyRecvBytes[] = "TCP_LAZY_RECV_BYTES";
inline constexpr char kTcpSocketBufferBytes[] = "TCP_SOCKET_BUFFER_BYTES";
inline constexpr char kShmSpinUs[] = "SHM_SPIN_US";
inline constexpr char kShmPieceBytes[] = "SHM_PIECE_BYTES";
inline constexpr char kShmRingBytes[] = "SHM_RING_BYTES";
inline constexpr char kShmYield[] = "SHM_YIELD";
inline constexpr char kShmSlowCopyMbps[] = "SHM_SLOW_COPY_MBPS";
inline constexpr char kGpuDataPath[] = "GPU_DATA_PATH";
inline constexpr char kRdmaProvider[] = "RDMA_PROVIDER";

// Read by hvdrun itself.
inline constexpr char kHeartbeatTimeoutMs[] = "HEARTBEAT_TIMEOUT_MS";

}  // namespace hvd::config_names

#endif  // HVD_CORE_COMMON_CONFIG_NAMES_H_
