/* The C ABI of libhvd.so: the only surface frameworks see.
 *
 * Plain C. Tensors cross as DLPack (dlpack/dlpack.h). Collectives are
 * asynchronous: each hvd_*_async call returns a handle at once; the operation
 * runs on hvd's background thread once every rank of its process set has
 * submitted it. Handles are never 0 or negative; an operation that fails
 * before it starts (bad argument, hvd not initialized) still returns a handle,
 * already complete with an error, so every error reaches the caller the same
 * way: hvd_wait() returns HVD_ERROR and hvd_handle_error() says why.
 *
 * Threading: every function may be called from any thread. Input tensors must
 * stay valid and unchanged until their handle completes; in-place outputs
 * must not be read before then.
 *
 * Process sets: id 0 is the global set (all ranks).
 */
#ifndef HVD_CORE_C_API_H_
#define HVD_CORE_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t hvd_handle;

/* Reduction ops (same values as hvd::ReduceOp). */
enum {
  HVD_OP_SUM = 0,
  HVD_OP_AVERAGE = 1,
  HVD_OP_MIN = 2,
  HVD_OP_MAX = 3,
  HVD_OP_PRODUCT = 4,
  HVD_OP_ADASUM = 5, /* refused with a clear error */
};

/* Element types (same values as hvd::DataType). */
enum {
  HVD_DTYPE_UINT8 = 0,
  HVD_DTYPE_INT8 = 1,
  HVD_DTYPE_UINT16 = 2,
  HVD_DTYPE_INT16 = 3,
  HVD_DTYPE_INT32 = 4,
  HVD_DTYPE_INT64 = 5,
  HVD_DTYPE_FLOAT16 = 6,
  HVD_DTYPE_BFLOAT16 = 7,
  HVD_DTYPE_FLOAT32 = 8,
  HVD_DTYPE_FLOAT64 = 9,
  HVD_DTYPE_BOOL = 10,
};

/* hvd_wait() and other int-returning calls. */
enum {
  HVD_OK = 0,
  HVD_TIMEOUT = 1,        /* hvd_wait: not complete yet */
  HVD_ERROR = -1,         /* the operation failed: see hvd_handle_error */
  HVD_INVALID_HANDLE = -2,
};

/* Options of one collective. Start from hvd_default_options() (op Sum,
 * factors 1.0, dtype -1, struct_size set), then set what you need.
 *
 * struct_size is sizeof(hvd_options) as the caller was compiled: a binding
 * that mirrors this struct (python/hvd/_lib.py) sets it to the size of its
 * own copy. Every call taking options refuses a struct_size this library
 * does not know (a caller built against another version of this header, or
 * a zero-initialised struct): the handle fails with InvalidArgument, and the
 * same text is the calling thread's hvd_last_error(). NULL options mean the
 * defaults. Fields are only ever appended, and each new one goes into
 * hvd_options_layout() too. */
typedef struct {
  size_t struct_size;      /* sizeof(hvd_options) of the caller */
  const char* name;        /* NULL or "": a name is generated (op.noname.N) */
  int32_t op;              /* HVD_OP_*: allreduce, reducescatter */
  double prescale_factor;  /* applied before the reduction */
  double postscale_factor; /* applied after it */
  int32_t process_set_id;  /* 0: global */
  int32_t root_rank;       /* broadcast: rank within the process set */
  const int64_t* splits;   /* alltoall: rows per destination; NULL: even */
  int32_t num_splits;
  void* stream;            /* cudaStream_t producing a GPU tensor, or NULL */
  int32_t dtype;           /* -1: from the DLPack dtype; else an HVD_DTYPE_*
                              (DLPack 0.6 has no bool: torch 1.13 exports
                              bool as uint8, so bindings say it here) */
} hvd_options;

hvd_options hvd_default_options(void);

/* hvd_options as this library was compiled, for bindings to test their copy
 * of the struct against: its size, then every field in order as
 * "name offset size", separated by ';' (e.g.
 * "80;struct_size 0 8;name 8 8;op 16 4;..."). Static storage. */
const char* hvd_options_layout(void);

/* Lifecycle. hvd_init reads HVD_* (or HOROVOD_*) from the environment; with
 * none set the process is a job of size 1. Returns HVD_OK or HVD_ERROR with
 * hvd_last_error(). Calling init twice is OK (no-op). */
int hvd_init(void);
int hvd_shutdown(void);
int hvd_is_initialized(void);
/* 1 while initialized and this process's part of the job has ended by
 * itself (a stall shutdown, another rank's shutdown, a lost peer): every
 * operation fails with the reason; hvd_shutdown then hvd_init joins a new
 * job. 0 otherwise. */
int hvd_has_ended(void);
/* The calling thread's last error from a non-handle call; "" if none. */
const char* hvd_last_error(void);
/* Its absl::StatusCode (0 if none), to pick an exception class. */
int hvd_last_error_code(void);
const char* hvd_version(void);

/* Elastic jobs (hvdrun --min-np or --host-discovery-script): the process
 * has HVD_ELASTIC_WORKER_ID, and each hvd_init joins the next round of the
 * job (proto/elastic.proto), whose rank and size replace the launch-time
 * ones. While a round runs, a loss anywhere in the job fails every pending
 * and later collective at once (HVD_ERROR, StatusCode ABORTED, the message
 * naming what was lost); the caller shuts down and inits again. An init
 * whose worker is no longer in the job (its host was removed) fails with
 * StatusCode CANCELLED and a message starting "removed from the elastic
 * job: ": the process should exit 0. */
int hvd_elastic_enabled(void); /* 1 in an elastic job's worker, else 0 */
int hvd_elastic_round(void);   /* the round last joined; -1 before any */
/* Host updates the launcher announced to this process (in any round): *seq
 * gets the newest update's number (0: none yet); *added and *removed get 1
 * if any update numbered above `after_seq` added or removed hosts. */
int hvd_elastic_host_updates(int64_t after_seq, int64_t* seq, int* added,
                             int* removed);

/* Topology; -1 before init. */
int hvd_rank(void);
int hvd_size(void);
int hvd_local_rank(void);
int hvd_local_size(void);
int hvd_cross_rank(void);
int hvd_cross_size(void);
int hvd_is_homogeneous(void); /* 1 if every host has the same local_size */

/* What this build holds: 1 or 0; hvd_nccl_built gives NCCL's version code
 * at build time (e.g. 21803), 0 without NCCL, as Horovod's nccl_built(). */
int hvd_nccl_built(void);
int hvd_cuda_built(void);
int hvd_mpi_built(void);  /* 0: hvd never uses MPI */
int hvd_gloo_built(void); /* 0: hvd has its own data plane */
/* For hvdrun --check-build, as this process finds them: the GPU backend
   ("NCCL 2.28.9, CUDA runtime 13.0, 0 device(s)", or why there is none) and
   the libfabric providers the RDMA transport can use, comma-separated (""
   if none). Each valid until the calling thread calls it again. */
const char* hvd_gpu_description(void);
const char* hvd_rdma_providers(void);

/* Collectives. `output` NULL (or equal to `input`) means in place.
 * Each returns a handle (> 0); errors found at submission fail that handle.
 * One error fails the call itself: a name (within its process set) still in
 * flight on this rank -- submitted, not yet completed -- returns 0 with
 * InvalidArgument as hvd_last_error; nothing is queued and the operation
 * already under that name goes on unaffected. */
hvd_handle hvd_allreduce_async(DLTensor* input, DLTensor* output,
                               const hvd_options* options);
/* One handle for the group; the group's tensors complete together. */
hvd_handle hvd_grouped_allreduce_async(int32_t count, DLTensor** inputs,
                                       DLTensor** outputs,
                                       const hvd_options* options);
/* Output allocated by hvd: take it with hvd_handle_output(h, 0). */
hvd_handle hvd_allgather_async(DLTensor* input, const hvd_options* options);
hvd_handle hvd_grouped_allgather_async(int32_t count, DLTensor** inputs,
                                       const hvd_options* options);
hvd_handle hvd_broadcast_async(DLTensor* input, DLTensor* output,
                               const hvd_options* options);
/* Output allocated by hvd; received splits via hvd_handle_splits. */
hvd_handle hvd_alltoall_async(DLTensor* input, const hvd_options* options);
/* First dimension split over the set's ranks, the first ranks taking one
 * row more when it does not divide evenly. Output allocated by hvd. */
hvd_handle hvd_reducescatter_async(DLTensor* input, const hvd_options* options);
hvd_handle hvd_grouped_reducescatter_async(int32_t count, DLTensor** inputs,
                                           const hvd_options* options);
hvd_handle hvd_barrier_async(const hvd_options* options);
/* This rank has no more data; completes when all ranks joined. Result: the
 * last rank to join (hvd_handle_result). */
hvd_handle hvd_join_async(const hvd_options* options);

/* Handles. */
int hvd_poll(hvd_handle handle); /* 1 done, 0 running, HVD_INVALID_HANDLE */
/* Blocks up to timeout_seconds (< 0: no limit). HVD_OK, HVD_TIMEOUT,
 * HVD_ERROR or HVD_INVALID_HANDLE. */
int hvd_wait(hvd_handle handle, double timeout_seconds);
/* Error text of a failed handle ("" if none); valid until hvd_release. */
const char* hvd_handle_error(hvd_handle handle);
/* absl::StatusCode of the failure (0 if none), to pick an exception class. */
int hvd_handle_error_code(hvd_handle handle);
/* Number of hvd-allocated outputs. */
int hvd_handle_output_count(hvd_handle handle);
/* Transfers ownership of output `index` to the caller, who must call its
 * deleter (torch.utils.dlpack.from_dlpack does). NULL if none. */
DLManagedTensor* hvd_handle_output(hvd_handle handle, int32_t index);
/* A new uninitialised host tensor with `like`'s shape and dtype (compact,
 * kDLCPU), for an out-of-place output. Large ones (>= 4 MiB) come from the
 * pool that hvd-allocated outputs use, on huge pages: once warm, an output
 * touches no fresh pages. The caller owns it and calls its deleter (a
 * framework's from_dlpack does), which returns the memory to the pool.
 * NULL with hvd_last_error() if `like` is not a dense CPU tensor. Needs no
 * hvd_init. */
DLManagedTensor* hvd_empty_like(const DLTensor* like);
/* Alltoall: writes up to `capacity` received row counts of output `index`;
 * returns how many there are, or -1. */
int hvd_handle_splits(hvd_handle handle, int32_t index, int64_t* splits,
                      int32_t capacity);
/* Join: last rank to join; -1 otherwise. */
int64_t hvd_handle_result(hvd_handle handle);
void hvd_release(hvd_handle handle);

/* Process sets: collective over all ranks, blocking. add returns the new id
 * (> 0), or -1 with hvd_last_error(). */
int32_t hvd_add_process_set(const int32_t* ranks, int32_t count);
int hvd_remove_process_set(int32_t id);
/* This process's rank in set `id`, -1 if not a member or no such set. */
int hvd_process_set_rank(int32_t id);
int hvd_process_set_size(int32_t id);
/* Writes up to `capacity` ranks; returns the set's size or -1. */
int hvd_process_set_ranks(int32_t id, int32_t* ranks, int32_t capacity);
/* Number of sets (global included) and their ids, up to `capacity`. */
int hvd_process_set_ids(int32_t* ids, int32_t capacity);

/* Timeline (rank 0 writes it). */
int hvd_start_timeline(const char* path, int mark_cycles);
int hvd_stop_timeline(void);

/* A training step ended (the framework bindings call it from their
 * optimizer's step): the time since the previous call is the step time
 * hvdrun --metrics-port shows. HVD_OK; a no-op when not initialized. */
int hvd_metrics_step(void);

#ifdef __cplusplus
}
#endif

#endif /* HVD_CORE_C_API_H_ */
