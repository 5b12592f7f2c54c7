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

/* ==== files and the on-disk cache =============================================================
 * The rules of libmscclrt's own caches (kernels, stdlib plans), for other caches of the project
 * (python/mscclrt's plans): the directory is $MSCCLRT_CACHE_DIR, else $XDG_CACHE_HOME/mscclrt,
 * else ~/.cache/mscclrt ("none": off), and it and its entries are used only when owned by this
 * user and writable by nobody else (else a WARN names the path and caching is off: a miss). */

/* [any thread] The entry `name` (a plain file name) of subdirectory `sub` (NULL: the directory
 * itself; created 0700 when missing), at most max bytes, opened without following links or
 * blocking. *data is a malloc'd copy with a NUL after its *len bytes (mscclrt_free), or NULL
 * on a miss (absent, untrusted, not a regular file, too large: a miss is not an error).
 * setting: MSCCLRT_CACHE_DIR's value as the caller sees it (NULL: as libmscclrt read it). */
MSCCLRT_API mscclrt_result mscclrt_cache_read(const char *setting, const char *sub,
                                              const char *name, size_t max, void **data,
                                              size_t *len);
/* [any thread] Replaces the entry atomically (a temporary file renamed over it). *written
 * (may be NULL) says whether it was; a cache that cannot be written is not an error. */
MSCCLRT_API mscclrt_result mscclrt_cache_write(const char *setting, const char *sub,
                                               const char *name, const void *data, size_t len,
                                               int *written);
/* [any thread] A whole regular file of at most max bytes, opened without blocking (a FIFO, a
 * device such as /dev/zero or a directory is MSCCLRT_ERR_INVALID_ARG, naming it). *data as
 * for mscclrt_cache_read. */
MSCCLRT_API mscclrt_result mscclrt_read_file(const char *path, size_t max, void **data,
                                             size_t *len);
/* [any thread] Frees what mscclrt_cache_read and mscclrt_read_file returned. NULL is a no-op. */
MSCCLRT_API void mscclrt_free(void *p);

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
/* [serialised per comm] How the comm's next calls are scheduled. seed 0: one host thread per rank,
 * thread blocks round-robin (fast; the default unless MSCCLRT_CPU_SEED is set). Any other seed:
 * every thread block of every rank runs in the calling thread, one op at a time, in an order
 * drawn from the seed and the call's number on this comm (counted from 0 again by this call),
 * so the same seed replays the same interleaving exactly. Different seeds try different orders:
 * a plan whose result depends on timing fails under many of them (mscclrt-run --schedules). A
 * call whose blocks all wait fails at once with MSCCLRT_ERR_TIMEOUT naming what they wait for.
 * MSCCLRT_CPU_SCHEDULES=K > 1 runs every call K times from the same start under seeds
 * seed..seed+K-1 (seed 0 counts as 1) and fails with MSCCLRT_ERR_PLAN when the results differ. */
MSCCLRT_API mscclrt_result mscclrt_cpu_comm_set_seed(mscclrt_cpu_comm *comm, unsigned long long seed);
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
/* [every rank of comm; comms of mscclrt_comm_init_rank/init_env] Ranks passing the same color
 * >= 0 form a new communicator on their devices, ranked by (key, rank in comm); color < 0 gives
 * *out = NULL (the rank still takes part). Collective over comm's bootstrap. */
MSCCLRT_API mscclrt_result mscclrt_comm_split(mscclrt_comm *comm, int color, int key,
                                              mscclrt_comm **out);
/* [every rank of comm except the excluded ones, which may be dead] A new communicator of the
 * remaining ranks in their order; nothing waits for an excluded rank. */
MSCCLRT_API mscclrt_result mscclrt_comm_shrink(mscclrt_comm *comm, const int *exclude,
                                               int nexclude, mscclrt_comm **out);
/* [every rank of comm] bytes from root's buf into every rank's buf, on the host, over the
 * bootstrap (for setup data, not for payloads). */
MSCCLRT_API mscclrt_result mscclrt_comm_host_bcast(mscclrt_comm *comm, void *buf, size_t bytes,
                                                   int root);

/* [any thread] Health of the comm, as NCCL's ncclCommGetAsyncError: MSCCLRT_SUCCESS, or
 * MSCCLRT_ERR_REMOTE when a peer process on this host is gone (its collectives would wait
 * forever) or the port proxy failed, MSCCLRT_ERR_INVALID_USAGE once revoked. Cheap: meant to be
 * polled by a watchdog thread while another thread issues collectives. */
MSCCLRT_API mscclrt_result mscclrt_comm_get_async_error(mscclrt_comm *comm);
/* [any thread] Running and queued kernels of the comm stop waiting (their results are
 * meaningless) and every later call on it fails; destroy or abort it afterwards. */
MSCCLRT_API mscclrt_result mscclrt_comm_revoke(mscclrt_comm *comm);
/* [any thread, not concurrently with a call on the comm] Stops the comm's kernels, waits at most
 * 10 s for its device, and releases it without any exchange with peers (which may be dead).
 * If the device does not finish in time, MSCCLRT_ERR_TIMEOUT: the comm is unusable and its
 * device memory stays allocated. NULL is a no-op. */
MSCCLRT_API mscclrt_result mscclrt_comm_abort(mscclrt_comm *comm);

/* [any thread] */
MSCCLRT_API mscclrt_result mscclrt_comm_rank(const mscclrt_comm *comm, int *rank);
MSCCLRT_API mscclrt_result mscclrt_comm_size(const mscclrt_comm *comm, int *size);
MSCCLRT_API mscclrt_result mscclrt_comm_device(const mscclrt_comm *comm, int *device);
/* [serialised per comm] Ranks on each node of the group (from the bootstrap's host grouping;
 * MSCCLRT_HOSTID overrides a host's identity); 0 when nodes hold different numbers of ranks. */
MSCCLRT_API mscclrt_result mscclrt_comm_ranks_per_node(mscclrt_comm *comm, int *ranks_per_node);

/* [any thread; the group state is the calling thread's] Group semantics as NCCL's: between start and end, mscclrt_execute only queues; end performs
 * the collective setups the queued calls need (all ranks' first calls for new buffers must meet)
 * and then launches everything in call order. Nestable; per thread. */
MSCCLRT_API mscclrt_result mscclrt_group_start(void);
MSCCLRT_API mscclrt_result mscclrt_group_end(void);
/* [the group's thread] Ends the group without running anything: the queued calls are dropped
 * and *usec (may be NULL) gets an estimate of their time from libmscclrt's model (a fixed cost
 * per call plus the bytes at a conservative NVLink rate). */
MSCCLRT_API mscclrt_result mscclrt_group_simulate_end(double *usec);

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
/* [any thread] The same check on the CPU reference backend, no GPU needed: nranks (the plan's)
 * host threads, inputs from the seed, outputs filled with 0xa5 bytes before each of `iters`
 * calls, every rank's output checked against the host reference (graph_iters and cumem are
 * ignored). A wrong result is MSCCLRT_ERR_INTERNAL; mscclrt_last_error() names the first
 * mismatch (rank, element, values), the output chunk it is in, the ops that write that chunk
 * (rank, thread block, op index and name) and whether the value is still the fill pattern. */
MSCCLRT_API mscclrt_result mscclrt_cpu_check_plan(const mscclrt_plan *plan, int nranks,
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


/* ==== algorithms, the collection, the selector, and NCCL-shaped collectives ======================
 * An algorithm is plan-based (a plan: compiled .coll or any MSCCL++ plan) or native (CUDA source
 * that includes the device library, compiled by NVRTC; see "native algorithms" below). Every
 * collective call (mscclrt_allreduce, ...) builds a request, asks the selector for an algorithm
 * with a block and thread count, and runs it on the caller's stream.
 *
 * Message sizes (min_bytes/max_bytes, mscclrt_request.message_bytes) count as nccl-tests does:
 * the larger of a rank's input and output (allgather and gather: the output; reducescatter,
 * alltoall and scatter: the input; send/recv: the bytes of the transfer). */
typedef enum mscclrt_coll {
    MSCCLRT_COLL_ALLREDUCE = 0, MSCCLRT_COLL_ALLGATHER, MSCCLRT_COLL_REDUCESCATTER,
    MSCCLRT_COLL_BROADCAST, MSCCLRT_COLL_REDUCE, MSCCLRT_COLL_ALLTOALL, MSCCLRT_COLL_GATHER,
    MSCCLRT_COLL_SCATTER, MSCCLRT_COLL_SENDRECV, MSCCLRT_COLL_COUNT
} mscclrt_coll;
/* [any thread] "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
 * "gather", "scatter", "sendrecv" */
MSCCLRT_API const char *mscclrt_coll_name(mscclrt_coll c);
MSCCLRT_API mscclrt_result mscclrt_coll_parse(const char *name, mscclrt_coll *out);

typedef enum mscclrt_buffer_mode {
    MSCCLRT_BUFFER_ANY = 0, MSCCLRT_BUFFER_INPLACE, MSCCLRT_BUFFER_OUTOFPLACE
} mscclrt_buffer_mode;

typedef enum mscclrt_algo_kind { MSCCLRT_ALGO_PLAN = 0, MSCCLRT_ALGO_NATIVE } mscclrt_algo_kind;

/* What an algorithm serves. Zero fields mean "any" (max_bytes 0: no upper bound). */
typedef struct mscclrt_algo_desc {
    const char *name;             /* unique in the collection; copied */
    mscclrt_coll collective;
    uint64_t min_bytes, max_bytes;
    int min_arch, max_arch;       /* compute capability x10 (90 = sm_90); 0: no bound */
    int world_size;               /* 0: any */
    int ranks_per_node;           /* 0: any */
    mscclrt_buffer_mode buffer_mode;
    const char *tags;             /* "key=value,key=value" (free text for selectors); copied */
} mscclrt_algo_desc;

typedef struct mscclrt_algo mscclrt_algo;

/* [any thread] A plan-based algorithm. desc NULL: everything from the plan (its name,
 * collective, size range, rank count, "inplace"); otherwise desc's non-zero fields override.
 * The buffer mode is the plan's own (in place: in-place calls only, as the plan addresses only
 * the input; otherwise out-of-place calls only); desc may narrow an out-of-place plan to in
 * place, never widen it. desc may not contradict the plan's collective or rank count; test and
 * custom plans take their collective from desc. A plan that reaches peers' input or output
 * serves only calls whose buffers lie in registered windows (req->symmetric). A rooted plan
 * serves the root of its tag "root=K", else rank 0.
 * The plan must stay alive as long as the algorithm (mscclrt_algo_free first). */
MSCCLRT_API mscclrt_result mscclrt_algo_from_plan(mscclrt_algo **out, const mscclrt_plan *plan,
                                                  const mscclrt_algo_desc *desc);
/* [any thread] A native algorithm from CUDA source text (source) or a file (path); exactly one
 * of the two. kernel: the __global__ function's name (extern "C"). desc->name and
 * desc->collective are required. Nothing is compiled until a communicator first runs it. */
MSCCLRT_API mscclrt_result mscclrt_algo_from_source(mscclrt_algo **out, const char *source,
                                                    const char *kernel,
                                                    const mscclrt_algo_desc *desc);
MSCCLRT_API mscclrt_result mscclrt_algo_from_file(mscclrt_algo **out, const char *path,
                                                  const char *kernel,
                                                  const mscclrt_algo_desc *desc);
/* [any thread] Drops the caller's reference (a registered algorithm lives until unregistered).
 * NULL is a no-op. */
MSCCLRT_API void mscclrt_algo_free(mscclrt_algo *algo);
/* [any thread] Borrowed strings, valid while the algorithm lives. */
MSCCLRT_API mscclrt_result mscclrt_algo_get_desc(const mscclrt_algo *algo, mscclrt_algo_desc *desc);
MSCCLRT_API mscclrt_algo_kind mscclrt_algo_kind_of(const mscclrt_algo *algo);
/* [every rank, no call on its communicators meanwhile] Drops the contexts (scratch, peer tables,
 * kernels) that communicators hold for this algorithm; the next call sets them up again
 * (collectively), so every rank must clean the same algorithms. It advances the algorithm's
 * generation: each communicator drops the contexts of an older generation at its next use of
 * the algorithm. */
MSCCLRT_API mscclrt_result mscclrt_algo_clean_cached_contexts(mscclrt_algo *algo);

/* ---- the collection (process-wide; [any thread]) ---------------------------------------------
 * Registered algorithms come before the default collection in selection: plan-based ones first,
 * then native ones, each in registration order. Register before creating communicators, or on
 * every rank in the same order: the choice must be the same on every rank. */
MSCCLRT_API mscclrt_result mscclrt_algo_register(mscclrt_algo *algo);   /* takes a reference */
MSCCLRT_API mscclrt_result mscclrt_algo_unregister(const char *name);
/* Up to max registered algorithms (of collective coll, or all when coll is MSCCLRT_COLL_COUNT)
 * into algos (borrowed: valid while registered); *n gets how many there are in all. */
MSCCLRT_API mscclrt_result mscclrt_algo_list(mscclrt_coll coll, const mscclrt_algo **algos,
                                             int max, int *n);
MSCCLRT_API const mscclrt_algo *mscclrt_algo_find(const char *name);
/* [serialised per comm] Up to max algorithms of comm's default collection (of collective coll,
 * or all when coll is MSCCLRT_COLL_COUNT): the stdlib programs compiled for the comm's layout and
 * the built-in native algorithms, built on first use (not collective). Borrowed: valid while the
 * comm lives. *n gets how many there are in all. Registered algorithms are not included
 * (mscclrt_algo_list has them). */
MSCCLRT_API mscclrt_result mscclrt_comm_algorithms(mscclrt_comm *comm, mscclrt_coll coll,
                                                   const mscclrt_algo **algos, int max, int *n);

/* ---- selection ------------------------------------------------------------------------------ */
typedef struct mscclrt_request {
    mscclrt_coll collective;
    uint64_t message_bytes;       /* as the size ranges count (above) */
    uint64_t in_bytes, out_bytes; /* this rank's */
    mscclrt_dtype dtype;
    int op;                       /* mscclrt_redop, or a PreMulSum operator from mscclrt_redop_create_premulsum */
    int world_size, ranks_per_node, rank; /* ranks_per_node 0: nodes of different sizes */
    int root;                     /* broadcast, reduce, gather, scatter; else -1 */
    int peer;                     /* send/recv with one peer; else -1 */
    const void *sendbuf;
    void *recvbuf;
    void *stream;
    int capturing;                /* the stream is capturing a CUDA graph */
    int arch;                     /* compute capability x10 */
    int inplace;                  /* 1 in place, 0 out of place; 2 for the rooted collectives
                                     (broadcast, reduce, gather, scatter), whose non-roots cannot
                                     know the root's mode: only "any buffers" algorithms fit, so
                                     every rank chooses alike */
    int symmetric;                /* both buffers lie in windows registered on this comm */
} mscclrt_request;

typedef struct mscclrt_choice {
    const mscclrt_algo *algo;
    int blocks, threads;          /* 0: the algorithm's own default */
} mscclrt_choice;

/* A selector returns 1 with *choice filled, 0 for "no opinion" (the default selector then
 * decides), or a negative value when it failed (the call then fails with
 * MSCCLRT_ERR_INVALID_USAGE; the selector reports the reason itself). candidates: the communicator's usable algorithms for this collective (registered
 * ones first, then the default collection), n of them. It runs on the calling thread inside the
 * collective call and must give the same answer on every rank for the same call: a split choice
 * would hang the collective. It must not call libmscclrt's collective functions. */
typedef int (*mscclrt_selector_fn)(const mscclrt_request *req,
                                   const mscclrt_algo *const *candidates, int n,
                                   mscclrt_choice *choice, void *user);
/* [any thread] The one selector: registering again replaces it; NULL restores the default. */
MSCCLRT_API mscclrt_result mscclrt_set_selector(mscclrt_selector_fn fn, void *user);
/* [any thread] 1 when algo can serve req (filled completely, as for mscclrt_select_among), else 0
 * with *why (may be NULL; static or this thread's text, valid until its next call) saying why. */
MSCCLRT_API int mscclrt_algo_fits(const mscclrt_algo *algo, const mscclrt_request *req,
                                  const char **why);
/* [any thread] The selector chain (the selector, then the default selector with its tuning
 * table) over the given candidates for a request the caller fills completely (world_size,
 * ranks_per_node, arch...): no communicator, nothing runs (for tools, tests and tuners). */
MSCCLRT_API mscclrt_result mscclrt_select_among(const mscclrt_request *req,
                                                const mscclrt_algo *const *cand, int n,
                                                mscclrt_choice *choice);
/* [any thread] Replaces the process's tuning table (libmscclrt(3) TUNING TABLE; at first the
 * file MSCCLRT_TUNING_FILE names) with the file at path, validated now: a bad file is
 * MSCCLRT_ERR_INVALID_ARG naming the entry and field, and the table in use stays. NULL or ""
 * drops the table. Selections on every communicator use the new table from their next call. An
 * autotuner running in the application calls it after writing its table, on every rank. */
MSCCLRT_API mscclrt_result mscclrt_tuning_load(const char *path);
/* [any thread] Checks a tuning table by the rules of mscclrt_tuning_load without installing
 * it: the len bytes at text when text is not NULL (path, which may then be NULL, only names it
 * in messages), else the file at path. A bad table is MSCCLRT_ERR_INVALID_ARG, and
 * mscclrt_last_error() names the table, the entry and the field ("tune.json: entries[3].dtype:
 * unknown data type 'bf17' (...)"). *entries (may be NULL) is the number of entries. */
MSCCLRT_API mscclrt_result mscclrt_tuning_validate(const char *path, const char *text,
                                                   size_t len, int *entries);
/* [serialised per comm] What the selector chain would choose for req on comm (for tests and
 * tools); runs nothing. */
MSCCLRT_API mscclrt_result mscclrt_select(mscclrt_comm *comm, const mscclrt_request *req,
                                          mscclrt_choice *choice);

/* ---- NCCL-shaped collectives [serialised per comm] --------------------------------------------
 * Counts are elements; buffers are device pointers of the comm's device; the call is enqueued on
 * stream and returns without waiting. Inside mscclrt_group_start/end the calls are queued and
 * launched at group end (send/recv pairs of a group run together). Any count is accepted (0
 * too). op: mscclrt_redop or a PreMulSum operator. */
MSCCLRT_API mscclrt_result mscclrt_allreduce(mscclrt_comm *comm, const void *sendbuf, void *recvbuf,
                                             size_t count, mscclrt_dtype dtype, int op, void *stream);
MSCCLRT_API mscclrt_result mscclrt_allgather(mscclrt_comm *comm, const void *sendbuf, void *recvbuf,
                                             size_t sendcount, mscclrt_dtype dtype, void *stream);
MSCCLRT_API mscclrt_result mscclrt_reducescatter(mscclrt_comm *comm, const void *sendbuf,
                                                 void *recvbuf, size_t recvcount,
                                                 mscclrt_dtype dtype, int op, void *stream);
MSCCLRT_API mscclrt_result mscclrt_broadcast(mscclrt_comm *comm, const void *sendbuf, void *recvbuf,
                                             size_t count, mscclrt_dtype dtype, int root, void *stream);
MSCCLRT_API mscclrt_result mscclrt_reduce(mscclrt_comm *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, mscclrt_dtype dtype, int op, int root,
                                          void *stream);
MSCCLRT_API mscclrt_result mscclrt_alltoall(mscclrt_comm *comm, const void *sendbuf, void *recvbuf,
                                            size_t count, mscclrt_dtype dtype, void *stream);
MSCCLRT_API mscclrt_result mscclrt_gather(mscclrt_comm *comm, const void *sendbuf, void *recvbuf,
                                          size_t sendcount, mscclrt_dtype dtype, int root, void *stream);
MSCCLRT_API mscclrt_result mscclrt_scatter(mscclrt_comm *comm, const void *sendbuf, void *recvbuf,
                                           size_t recvcount, mscclrt_dtype dtype, int root, void *stream);
MSCCLRT_API mscclrt_result mscclrt_send(mscclrt_comm *comm, const void *buf, size_t count,
                                        mscclrt_dtype dtype, int peer, void *stream);
MSCCLRT_API mscclrt_result mscclrt_recv(mscclrt_comm *comm, void *buf, size_t count,
                                        mscclrt_dtype dtype, int peer, void *stream);

/* PreMulSum: sum after multiplying every input by a scalar of type dtype, read from host memory
 * at this call (MSCCLRT_SCALAR_HOST) or from device memory at each collective (..._DEVICE). The
 * operator is valid on this comm until mscclrt_redop_destroy. */
typedef enum { MSCCLRT_SCALAR_DEVICE = 0, MSCCLRT_SCALAR_HOST = 1 } mscclrt_scalar_residence;
MSCCLRT_API mscclrt_result mscclrt_redop_create_premulsum(mscclrt_comm *comm, int *op,
                                                          const void *scalar, mscclrt_dtype dtype,
                                                          mscclrt_scalar_residence residence);
MSCCLRT_API mscclrt_result mscclrt_redop_destroy(mscclrt_comm *comm, int op);

/* ---- buffer registration [serialised per comm] -----------------------------------------------
 * Windows (collective: every rank registers its window in the same order): peers learn the
 * window's address once, so later calls whose buffers lie in windows may use algorithms that
 * read and write peers' buffers directly (zero copy), with no exchange per call. Each rank's
 * buffers may sit at any offset of its window. */
typedef struct mscclrt_window mscclrt_window;
MSCCLRT_API mscclrt_result mscclrt_window_register(mscclrt_comm *comm, void *buf, size_t bytes,
                                                   mscclrt_window **win);
MSCCLRT_API mscclrt_result mscclrt_window_deregister(mscclrt_comm *comm, mscclrt_window *win);

/* ---- native algorithms ---------------------------------------------------------------------------
 * The source is compiled by NVRTC with the device library on the include path
 * (#include "mscclrt_native.cuh") for the device's architecture. A native algorithm of a
 * reducing collective (allreduce, reducescatter, reduce) is compiled once per (dtype, op) on
 * each communicator, with MSCCLRT_DTYPE (the mscclrt_dtype value), MSCCLRT_OP (the
 * mscclrt_redop value, 5 for PreMulSum) and MSCCLRT_T (the element type of the device library:
 * float, mk::f16, mk::bf16, ...) defined; any other one is compiled once, with MSCCLRT_DTYPE -1,
 * MSCCLRT_OP 0 and MSCCLRT_T mk::u8 (it moves bytes). The kernel is
 *     extern "C" __global__ void <kernel>(MnArgs args)
 * where MnArgs (kernels/native_abi.h) carries the call (buffers, sizes, count, dtype, op, root,
 * the PreMulSum scalar, extra arguments) and a pointer to the context the runtime set up once per
 * communicator: this rank's scratch and every peer's (mapped), per-(block, peer) signal counters
 * and slots (mscclrt_native.cuh has the helpers of its message/ack protocol). The kernel is
 * launched with the chosen blocks (at most 32) x threads, plainly (never with programmatic
 * stream serialization, which the library's own kernels use: MSCCLRT_LAUNCH_PDL). Point-to-point calls
 * (mscclrt_send/recv) do not consult the selector: a group's calls on one comm always become
 * one launch of the built-in send/recv kernel. */
/* [serialised per comm] Runs one algorithm directly, bypassing the selector (tuning, tests); a
 * plan-based one that cannot take the call (a PreMulSum operator, or its first use under
 * CUDA-graph capture) is replaced by the built-in native algorithm of the collective:
 * req gives the collective, buffers, sizes, dtype, op, root/peer and stream (message_bytes,
 * in_bytes and out_bytes must agree with the collective; world_size etc. are filled in);
 * blocks/threads 0 take the algorithm's defaults (plan-based: the plan's own); extra (at most
 * MSCCLRT_NATIVE_EXTRA_BYTES, native only) is copied into the launch arguments. */
#define MSCCLRT_NATIVE_EXTRA_BYTES 256
MSCCLRT_API mscclrt_result mscclrt_algo_run(mscclrt_comm *comm, const mscclrt_algo *algo,
                                            const mscclrt_request *req, int blocks, int threads,
                                            const void *extra, size_t extra_bytes);

#ifdef __cplusplus
}
#endif
#endif
