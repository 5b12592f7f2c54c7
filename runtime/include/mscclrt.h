/*
 * mscclrt.h - the whole public C API of libmscclrt: load MSCCL++ execution plans, run them on
 * a CPU reference backend (one host thread per rank) or on GPUs, and report errors.
 *
 * Thread safety: libmscclrt keeps no unsynchronised global state. Different communicators may be
 * used from different threads at the same time. Calls on one communicator must be serialised by
 * the caller. A loaded plan is read-only and may be shared between threads and communicators.
 * mscclrt_result_string, mscclrt_last_error and mscclrt_version may be called from any thread.
 * Error text is kept per thread. No call ever exits or aborts the process.
 */
#ifndef MSCCLRT_H
#define MSCCLRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSCCLRT_API __attribute__((visibility("default")))

#define MSCCLRT_VERSION_MAJOR 0
#define MSCCLRT_VERSION_MINOR 1
#define MSCCLRT_VERSION_PATCH 0
#define MSCCLRT_VERSION_STRING "0.1.0"

typedef enum mscclrt_result {
    MSCCLRT_SUCCESS = 0,
    MSCCLRT_ERR_INVALID_ARG,    /* bad value from the caller; no state changed           */
    MSCCLRT_ERR_INVALID_USAGE,  /* call not allowed now (e.g. comm already destroyed)     */
    MSCCLRT_ERR_PLAN,           /* plan malformed, or does not fit this call or group     */
    MSCCLRT_ERR_SYSTEM,         /* OS call or allocation failed; errno text in message    */
    MSCCLRT_ERR_CUDA,           /* driver or NVRTC failure; CUDA's name for it in message */
    MSCCLRT_ERR_REMOTE,         /* a peer went away or sent something malformed          */
    MSCCLRT_ERR_TIMEOUT,        /* a wait ran past its limit; message names who           */
    MSCCLRT_ERR_UNAVAILABLE,    /* a needed library or device is absent on this machine   */
    MSCCLRT_ERR_INTERNAL,       /* a bug in libmscclrt: please report                     */
} mscclrt_result;

/* Data types and reduction operators: the same values as NCCL's ncclDataType_t / ncclRedOp_t. */
typedef enum mscclrt_dtype {
    MSCCLRT_INT8 = 0, MSCCLRT_UINT8 = 1, MSCCLRT_INT32 = 2, MSCCLRT_UINT32 = 3,
    MSCCLRT_INT64 = 4, MSCCLRT_UINT64 = 5, MSCCLRT_FLOAT16 = 6, MSCCLRT_FLOAT32 = 7,
    MSCCLRT_FLOAT64 = 8, MSCCLRT_BFLOAT16 = 9, MSCCLRT_FP8_E4M3 = 10, MSCCLRT_FP8_E5M2 = 11,
    MSCCLRT_DTYPE_COUNT
} mscclrt_dtype;

typedef enum mscclrt_redop {
    MSCCLRT_SUM = 0, MSCCLRT_PROD = 1, MSCCLRT_MAX = 2, MSCCLRT_MIN = 3, MSCCLRT_AVG = 4,
    MSCCLRT_REDOP_COUNT
} mscclrt_redop;

/* LL packet format of a call (spec §4): LL16 = 8 data bytes per 16-byte packet (default). */
typedef enum mscclrt_packet { MSCCLRT_LL16 = 0, MSCCLRT_LL8 = 1 } mscclrt_packet;

/* Thread safety of each call is given as [any thread] or [serialised per comm]: the latter may
 * run concurrently on different comms, never on the same comm. */

/* [any thread] */
MSCCLRT_API const char *mscclrt_version(void);                   /* "0.1.0" */
MSCCLRT_API const char *mscclrt_result_string(mscclrt_result r); /* static text, never NULL */
MSCCLRT_API const char *mscclrt_last_error(void); /* this thread's last failure, with context */

/* [any thread] Names <-> values: "float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32",
 * "uint32", "int64", "uint64", "fp8_e4m3", "fp8_e5m2"; "sum", "prod", "max", "min", "avg". */
MSCCLRT_API const char *mscclrt_dtype_name(mscclrt_dtype t);
MSCCLRT_API size_t mscclrt_dtype_size(mscclrt_dtype t);          /* 0 for an invalid value */
MSCCLRT_API mscclrt_result mscclrt_dtype_parse(const char *name, mscclrt_dtype *out);
MSCCLRT_API const char *mscclrt_redop_name(mscclrt_redop op);
MSCCLRT_API mscclrt_result mscclrt_redop_parse(const char *name, mscclrt_redop *out);

/* ==== plans ===================================================================================
 * A plan is an MSCCL++ execution plan (JSON), validated completely at load. Immutable after
 * load; thread-safe to share. */
typedef struct mscclrt_plan mscclrt_plan;

/* [any thread] Loads and validates a plan file. On failure *out = NULL and mscclrt_last_error() names the
 * file, the JSON path and the value (e.g. "plan.json: gpus[3].threadblocks[2].ops[5]..."). */
MSCCLRT_API mscclrt_result mscclrt_plan_load(mscclrt_plan **out, const char *path);
/* Same, from text in memory; `what` names it in messages (may be NULL). */
MSCCLRT_API mscclrt_result mscclrt_plan_parse(mscclrt_plan **out, const char *text, size_t len,
                                              const char *what);
/* Not while another thread or an unfinished GPU call still uses the plan. NULL is a no-op. */
MSCCLRT_API void mscclrt_plan_free(mscclrt_plan *plan);

typedef struct mscclrt_plan_info {
    const char *name;          /* borrowed from the plan */
    const char *collective;    /* "allreduce", "allgather", ... */
    int nranks;
    int inplace;               /* plan's "inplace" */
    int protocol_ll;           /* 1 for "LL" */
    int threads_per_block;
    uint32_t alignment;        /* buffer_alignment */
    uint64_t min_message_size, max_message_size;
} mscclrt_plan_info;
/* [any thread] */
MSCCLRT_API mscclrt_result mscclrt_plan_get_info(const mscclrt_plan *plan, mscclrt_plan_info *info);
/* [any thread] Per-rank input and output byte counts for a message of `bytes` as nccl-tests counts it
 * (allgather: bytes = output; reducescatter and alltoall: bytes = input), checked against the
 * plan's alignment, chunk counts and size range. */
MSCCLRT_API mscclrt_result mscclrt_plan_call_sizes(const mscclrt_plan *plan, size_t bytes,
                                                   size_t *in_bytes, size_t *out_bytes);
/* [any thread] The smallest legal `bytes` for this plan (respecting alignment, chunks and min size). */
MSCCLRT_API mscclrt_result mscclrt_plan_min_bytes(const mscclrt_plan *plan, size_t *bytes);

/* ==== CPU reference backend ===================================================================
 * An in-process group of nranks host "ranks", one thread each, running plans over host
 * buffers with the intended semantics of the plan format (see libmscclrt(3) for where it
 * differs from MSCCL++'s executor). Used by CI to prove plans compute their collective. */
typedef struct mscclrt_cpu_comm mscclrt_cpu_comm;

/* [any thread] */
MSCCLRT_API mscclrt_result mscclrt_cpu_comm_create(mscclrt_cpu_comm **out, int nranks);
/* [serialised per comm] NULL is a no-op. */
MSCCLRT_API void mscclrt_cpu_comm_destroy(mscclrt_cpu_comm *comm);
/* [serialised per comm] Runs one call of `plan` on every rank and returns when all ranks finished (or failed).
 * send[r]/recv[r] are rank r's buffers of in_bytes/out_bytes (recv[r] may equal send[r] or
 * contain it, for in-place calls). Contexts (scratch, semaphores, LL flags) persist in the comm
 * between calls, as on a GPU. A run that stops making progress fails with MSCCLRT_ERR_TIMEOUT
 * naming the rank, thread block, op and what it waits for (MSCCLRT_CPU_TIMEOUT_MS).
 * MSCCLRT_AVG: every reduction sums; for allreduce and reducescatter plans each rank's output
 * is divided by nranks after the call. After a failed call the comm drops its contexts (their
 * state is unknown) and stays usable. */
MSCCLRT_API mscclrt_result mscclrt_cpu_execute(mscclrt_cpu_comm *comm, const mscclrt_plan *plan,
                                               void *const *send, void *const *recv,
                                               size_t in_bytes, size_t out_bytes,
                                               mscclrt_dtype dtype, mscclrt_redop op,
                                               mscclrt_packet packet);

/* ==== GPU communicators and execution ==========================================================
 * (section owned by the GPU runtime: bootstrap, communicators, execute on a stream) */
typedef struct mscclrt_comm mscclrt_comm;   /* one rank's membership in a GPU group */

/* [any thread] Single-process group: comms[i] is rank i on CUDA device devlist[i] (devlist NULL: 0..ndev-1).
 * Peer access is enabled between all pairs; remote buffers are plain peer pointers. One thread
 * may drive every comm (inside mscclrt_group_start/end), or each comm may be used from its own
 * thread (thread-per-GPU). A device may appear twice (two ranks on one GPU, for tests). */
MSCCLRT_API mscclrt_result mscclrt_comm_init_all(mscclrt_comm **comms, int ndev,
                                                 const int *devlist);
/* [any thread; each rank's init_rank from its own thread or process] One process (or thread)
 * per GPU: rank 0 makes an id with mscclrt_get_unique_id (it starts a
 * rendezvous server thread) and hands it to every rank (MPI_Bcast, a file...); each rank calls
 * mscclrt_comm_init_rank with it, its rank and its CUDA device (-1: rank modulo the device
 * count). Collective setups then go through the bootstrap and CUDA IPC. */
#define MSCCLRT_UNIQUE_ID_BYTES 128
typedef struct mscclrt_unique_id { char internal[MSCCLRT_UNIQUE_ID_BYTES]; } mscclrt_unique_id;
MSCCLRT_API mscclrt_result mscclrt_get_unique_id(mscclrt_unique_id *id);
MSCCLRT_API mscclrt_result mscclrt_comm_init_rank(mscclrt_comm **comm, int nranks,
                                                  mscclrt_unique_id id, int rank, int device);
/* [serialised per comm] Releases the comm's GPU resources after waiting for its work. NULL is a no-op. Destroy every
 * comm of a group only when no rank still runs a collective (init_rank comms: collective, all
 * ranks destroy together). */
MSCCLRT_API mscclrt_result mscclrt_comm_destroy(mscclrt_comm *comm);
/* [any thread] */
MSCCLRT_API mscclrt_result mscclrt_comm_rank(const mscclrt_comm *comm, int *rank);
MSCCLRT_API mscclrt_result mscclrt_comm_size(const mscclrt_comm *comm, int *size);
MSCCLRT_API mscclrt_result mscclrt_comm_device(const mscclrt_comm *comm, int *device);

/* [any thread; the group state is the calling thread's] Group semantics as NCCL's: between start and end, mscclrt_execute only queues; end performs
 * the collective setups the queued calls need (all ranks' first calls for new buffers must meet)
 * and then launches everything in call order. Nestable; per thread. */
MSCCLRT_API mscclrt_result mscclrt_group_start(void);
MSCCLRT_API mscclrt_result mscclrt_group_end(void);

/* [serialised per comm] Runs `plan` as rank mscclrt_comm_rank(comm) on `stream` (a CUstream / cudaStream_t; NULL is
 * the legacy default stream). sendbuf/recvbuf are device pointers of this comm's device;
 * in_bytes/out_bytes are this rank's message sizes (see mscclrt_plan_call_sizes). The first
 * call for a (plan, sendbuf, recvbuf) sets up scratch, semaphores and peer addresses
 * collectively: every rank of the group must make its matching first call (from its own
 * thread, or from one thread inside a group), and that first call must not be captured into a
 * CUDA graph. Later calls only launch the kernel (no host synchronisation), and may be captured
 * and replayed. The kernel for each (plan, rank, dtype, op) is generated and compiled with
 * NVRTC on first use (cached in $MSCCLRT_CACHE_DIR). Every rank must issue the same sequence of
 * calls for a given (plan, buffers). mscclrt_execute uses LL16 packets. */
MSCCLRT_API mscclrt_result mscclrt_execute(mscclrt_comm *comm, const mscclrt_plan *plan,
                                           const void *sendbuf, void *recvbuf, size_t in_bytes,
                                           size_t out_bytes, mscclrt_dtype dtype,
                                           mscclrt_redop op, void *stream);
MSCCLRT_API mscclrt_result mscclrt_execute_ex(mscclrt_comm *comm, const mscclrt_plan *plan,
                                              const void *sendbuf, void *recvbuf,
                                              size_t in_bytes, size_t out_bytes,
                                              mscclrt_dtype dtype, mscclrt_redop op,
                                              mscclrt_packet packet, void *stream);

/* [no other call on these comms meanwhile] One-call GPU check of a plan (for mscclrt-run --backend gpu and tests) on a single-process
 * group from mscclrt_comm_init_all (nranks comms; nranks must equal the plan's). Fills inputs
 * with deterministic data (seed), runs `iters` back-to-back calls (then, if
 * graph_iters > 0, that many more inside one captured CUDA graph), and checks every rank's
 * output against the host reference. `bytes` is the message as nccl-tests counts it.
 * inplace != 0 runs in place (allgather: send inside recv; reducescatter: recv inside send).
 * Returns MSCCLRT_SUCCESS if correct; a wrong result is MSCCLRT_ERR_INTERNAL with the first
 * mismatch in mscclrt_last_error(). *usec (may be NULL) gets the mean time per call. */
typedef struct mscclrt_gpu_check {
    size_t bytes;
    mscclrt_dtype dtype;
    mscclrt_redop op;
    mscclrt_packet packet;
    int inplace;
    int iters;
    int graph_iters;
    uint64_t seed;
    int cumem;          /* 1: send/recv are cuMem (VMM) allocations exportable as POSIX fds, as
                           PyTorch's expandable segments make them; 0: cuMemAlloc */
} mscclrt_gpu_check;
MSCCLRT_API mscclrt_result mscclrt_gpu_check_plan(mscclrt_comm *const *comms, int nranks,
                                                  const mscclrt_plan *plan,
                                                  const mscclrt_gpu_check *chk, double *usec);
/* [serialised per comm; every rank of the group calls it] The same check as mscclrt_gpu_check_plan
 * by one rank of a group of processes (or threads) from mscclrt_comm_init_rank or
 * mscclrt_comm_init_env, whose size must equal the plan's. The rank fills its own input (the
 * same data as mscclrt_gpu_check_plan gives it), makes the same calls (iters back to back, the
 * first being the collective setup, then graph_iters inside one captured CUDA graph), waits with
 * a deadline, and checks its own output against the host reference, regenerating the other
 * ranks' inputs a block at a time (memory: its buffers plus nranks x 1 MiB). The ranks then
 * exchange verdicts over the bootstrap: every rank returns the same result, the lowest failing
 * rank's code with "rank R: " and its message (a wrong result is MSCCLRT_ERR_INTERNAL, a hung
 * rank MSCCLRT_ERR_TIMEOUT). *usec (may be NULL) gets the largest of the ranks' mean times per
 * call. After MSCCLRT_ERR_TIMEOUT a kernel may still run: do not destroy the comm, exit. */
MSCCLRT_API mscclrt_result mscclrt_gpu_check_rank(mscclrt_comm *comm, const mscclrt_plan *plan,
                                                  const mscclrt_gpu_check *chk, double *usec);
/* [any thread; every rank from its own process or thread] Joins the group that the launcher's
 * environment describes (torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; Open
 * MPI: OMPI_COMM_WORLD_*; Slurm: SLURM_*; MSCCLRT_MASTER_ADDR/PORT win over MASTER_*): rank 0
 * runs the rendezvous on the master port, no unique id is passed. device -1: the rank's local
 * rank on its host modulo the device count. A missing variable is MSCCLRT_ERR_INVALID_USAGE
 * naming it. Otherwise as mscclrt_comm_init_rank. */
MSCCLRT_API mscclrt_result mscclrt_comm_init_env(mscclrt_comm **comm, int device);

#ifdef __cplusplus
}
#endif
#endif
