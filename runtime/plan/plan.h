/*
 * plan.h - the one C model of an MSCCL++ execution plan, shared by mscclc (emit, --dump),
 * libmscclrt (load, CPU backend, code generation) and the tests.
 * The model mirrors the JSON of ../shared/spec/plan-format.md §2 field by field; index spaces
 * (§2.7) are kept exactly as in the JSON so a plan round-trips. Errors go to a caller-owned
 * PlanErr, never to global state, so this module needs nothing from runtime/core.
 */
#ifndef MSCCL_PLAN_H
#define MSCCL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Executor limits (spec §2.8). The model's fixed arrays are sized by them: the loader and the
 * compiler reject anything larger with an error instead of overflowing. */
#define PLAN_MAX_OPS_PER_TB    64   /* after flattening pipelines; MSCCL++ only (PlanTarget) */
#define PLAN_MAX_TB_CHANNELS   16   /* per type, per thread block */
#define PLAN_MAX_TB_REMOTES    16   /* per access type, per thread block */
#define PLAN_MAX_OP_CHANNELS   8    /* channel_ids of one op */
#define PLAN_MAX_OP_ENTRIES    10   /* src_buff or dst_buff entries of one op */
#define PLAN_MAX_OP_SEMAPHORES 16
#define PLAN_MAX_BARRIERS      16
#define PLAN_MAX_THREADS       1024
#define PLAN_MAX_PIPELINE_ITER 65535 /* the device reads the iteration count as uint16 */

/* Plan loader limits beyond the executor's: they bound the memory hostile input can take, and
 * the compiler refuses programs whose plans would cross them. */
#define PLAN_MAX_FILE_BYTES    ((size_t)256 << 20)  /* the JSON text */
#define PLAN_MAX_RANKS         16384
#define PLAN_MAX_TBS           1024                 /* per rank: blocks of one kernel launch */
#define PLAN_MAX_TOTAL_OPS     (1L << 20)           /* all ranks, pipelines flattened */

typedef enum {
#define OP(e, name, flags) PLAN_OP_##e,
#include "ops.def"
#undef OP
    PLAN_OP_COUNT
} PlanOpKind;

enum { /* op flags of ops.def */
    OPF_SYNC = 1 << 0, OPF_CHANNEL = 1 << 1, OPF_PACKET = 1 << 2,
    OPF_REDUCE = 1 << 3, OPF_REMOTE = 1 << 4, OPF_SWITCH = 1 << 5,
};

typedef enum { PLAN_BUF_INPUT, PLAN_BUF_OUTPUT, PLAN_BUF_SCRATCH, PLAN_BUF_COUNT } PlanBuf;
/* JSON "channel_type"; PLAN_CHAN_NONE when the key is absent or "none". Memory, port and
 * switch are also the per-type table indices below (0, 1, 2). */
typedef enum { PLAN_CHAN_MEMORY, PLAN_CHAN_PORT, PLAN_CHAN_SWITCH, PLAN_CHAN_NONE } PlanChanType;
#define PLAN_CHAN_TYPES 3   /* memory, port, switch */
#define PLAN_REMOTE_TYPES 2 /* memory, port: the access types of remote buffers */

/* The JSON "collective". reduce, gather and scatter (rooted, for libmscclrt's algorithm layer)
 * come after the names MSCCL++ writes, so the older values keep their numbers; the .coll
 * language does not lower them (yet). Sizes: gather counts like allgather (the output is the
 * message), scatter like reducescatter (the input), reduce like allreduce. */
typedef enum {
    PLAN_COLL_ALLREDUCE, PLAN_COLL_ALLGATHER, PLAN_COLL_REDUCESCATTER, PLAN_COLL_ALLTOALL,
    PLAN_COLL_BROADCAST, PLAN_COLL_SENDRECV, PLAN_COLL_TEST, PLAN_COLL_CUSTOM,
    PLAN_COLL_REDUCE, PLAN_COLL_GATHER, PLAN_COLL_SCATTER, PLAN_COLL_COUNT
} PlanCollective;

/* The runtime a plan is meant for: the optional top-level "target" (our extension, which
 * MSCCL++ ignores). MSCCL++'s executor limits a thread block to PLAN_MAX_OPS_PER_TB operations;
 * libmscclrt's generated kernels have no such table, so only plans for MSCCL++ keep that limit. */
typedef enum {
    PLAN_TARGET_NONE,              /* no "target": any plan, MSCCL++'s own among them */
    PLAN_TARGET_MSCCLRT,           /* "mscclrt": libmscclrt (mscclc's default) */
    PLAN_TARGET_MSCCLPP,           /* "mscclpp": MSCCL++'s executor, whose limits all apply */
    PLAN_TARGET_COUNT
} PlanTarget;

/* The plan's "reduce_op" string. MSCCL++ ignores it (every reduction is a sum); libmscclrt
 * applies the operator given at execution time, so this is informational. */
typedef enum { PLAN_RED_NONE, PLAN_RED_SUM, PLAN_RED_PROD, PLAN_RED_MIN, PLAN_RED_MAX,
               PLAN_RED_AVG } PlanRedOp;

typedef enum { PLAN_REF_LOCAL, PLAN_REF_REMOTE, PLAN_REF_SWITCH } PlanRefKind;

/* Source position of what produced a model element: a .coll statement (compiler) or 0:0. */
typedef struct { int line, col; } PlanLoc;

/* One src_buff/dst_buff entry (spec §2.6). index/size count chunks. */
typedef struct {
    PlanRefKind kind;
    PlanBuf type;     /* valid for PLAN_REF_LOCAL ("type") */
    int id;           /* PLAN_REF_REMOTE: TB-local remote index ("buffer_id");
                         PLAN_REF_SWITCH: TB-local switch index ("switch_channel_id") */
    uint32_t index;   /* first chunk */
    uint32_t size;    /* number of chunks */
    int rank;         /* optional "rank" key (gstore sources); -1 when absent */
} PlanRef;

typedef struct PlanOp PlanOp;
struct PlanOp {
    PlanOpKind kind;
    PlanChanType chan_type;        /* "channel_type"; PLAN_CHAN_NONE when absent */
    int nchan;
    int chan_ids[PLAN_MAX_OP_CHANNELS];   /* TB-local channel indices of chan_type */
    int nsrc, ndst;
    PlanRef src[PLAN_MAX_OP_ENTRIES];
    PlanRef dst[PLAN_MAX_OP_ENTRIES];
    int nsem;
    int sem_ids[PLAN_MAX_OP_SEMAPHORES];  /* indices into PlanGpu.sem_init */
    int barrier_id;                /* BARRIER: 0..15 */
    int num_threadblocks;          /* BARRIER: participants */
    int tbg_id, tbg_size;          /* "tbg_info"; tbg_size == 0 means absent */
    PlanRedOp reduce_op;           /* PLAN_RED_NONE when absent */
    /* PIPELINE only: */
    uint64_t unit_size;            /* "iter_context.unit_size", bytes */
    uint32_t num_chunks;           /* "iter_context.num_chunks" */
    int ninner;
    PlanOp *inner;                 /* owned; [ninner]; never nested pipelines */
    PlanLoc loc;                   /* where the compiler made it; diagnostics only */
    int data_sync;                 /* compiler only (never in JSON): PLAN_SYNC_BEFORE/AFTER bits
                                      of a sync op, as the DSL's data_sync (spec §8.5) */
};
enum { PLAN_SYNC_BEFORE = 1, PLAN_SYNC_AFTER = 2, PLAN_SYNC_BOTH = 3 };

typedef struct {
    int id;                        /* == position in PlanGpu.tbs (spec §9.14) */
    int nops;
    PlanOp *ops;                   /* owned; [nops], top level (pipelines hold their own) */
    int cap_ops;                   /* allocation size of ops */
    /* "channels": GPU-level channel ids, per type (memory, port, switch); position = TB-local index */
    int nchan[PLAN_CHAN_TYPES];
    int chan[PLAN_CHAN_TYPES][PLAN_MAX_TB_CHANNELS];
    /* "remote_buffer_refs": GPU-level remote-buffer ids per access type (memory, port) */
    int nremote[PLAN_REMOTE_TYPES];
    int remote[PLAN_REMOTE_TYPES][PLAN_MAX_TB_REMOTES];
} PlanTb;

/* A switch channel (one "rank_groups" element). */
typedef struct {
    PlanBuf buf;                   /* "buffer_type" */
    int nranks;
    int *ranks;                    /* owned; [nranks] */
} PlanSwitch;

/* A "remote_buffers" entry: this GPU accesses buffer `type` of `rank`. */
typedef struct {
    int rank;
    PlanBuf type;
    bool access[PLAN_REMOTE_TYPES];  /* [memory], [port] */
} PlanRemote;

typedef struct {
    int id;                        /* == position in Plan.gpus */
    uint32_t input_chunks, output_chunks, scratch_chunks;
    int npeers[2];                 /* memory, port: length of the concatenated connected_to */
    int *peers[2];                 /* owned; GPU-level channel index -> peer rank */
    int nswitch;
    PlanSwitch *switches;          /* owned; GPU-level switch index -> channel */
    int nremotes;
    PlanRemote *remotes;           /* owned; GPU-level remote-buffer id -> buffer */
    int nsems;
    int *sem_init;                 /* owned; "semaphores[k].init_value" */
    int ntbs;
    PlanTb *tbs;                   /* owned */
} PlanGpu;

typedef struct {
    char *name;                    /* owned */
    PlanCollective collective;
    char *collective_name;         /* owned; the JSON string as written */
    bool protocol_ll;              /* protocol == "LL" */
    bool inplace;
    bool reuse_resources;
    int threads;                   /* num_threads_per_block (default 1024) */
    bool double_scratch;           /* use_double_scratch_buffer */
    bool scratch_device;           /* the scratch must be device memory (the built-in native
                                      context keeps counters in it that kernels update with
                                      atomics): never moved to host memory (exec_mp.c) */
    uint32_t alignment;            /* buffer_alignment (default 16) */
    uint64_t min_size, max_size;   /* min/max_message_size (inclusive) */
    int ntags;
    char **tags;                   /* owned; optional "tags" (mscclc extension, ignored by MSCCL++) */
    PlanTarget target;             /* optional "target" (mscclc extension, ignored by MSCCL++) */
    int ngpus;
    PlanGpu *gpus;                 /* owned */
} Plan;

/* Error sink for every fallible plan function: the first failure's text. */
typedef struct { char msg[1024]; } PlanErr;

/* ---- model construction (plan_model.c) ------------------------------------------------ */
const char *plan_op_name(PlanOpKind k);            /* JSON name */
int plan_op_flags(PlanOpKind k);
bool plan_op_from_name(const char *s, PlanOpKind *out);
const char *plan_buf_name(PlanBuf b);              /* "i", "o", "s" */
const char *plan_buf_long_name(PlanBuf b);         /* "input", "output", "scratch" */
const char *plan_chan_name(PlanChanType t);        /* "memory", "port", "switch", "none" */
const char *plan_coll_name(PlanCollective c);
/* Whether c combines values (allreduce, reducescatter, reduce) and so takes an operator. */
bool plan_coll_reduces(PlanCollective c);
bool plan_coll_from_name(const char *s, PlanCollective *out);
const char *plan_target_name(PlanTarget t);         /* "mscclrt", "mscclpp"; NULL for NONE */
bool plan_target_from_name(const char *s, PlanTarget *out);
const char *plan_redop_name(PlanRedOp r);
bool plan_redop_from_name(const char *s, PlanRedOp *out);

/* A new empty plan (defaults of spec §2.1) with ngpus zeroed GPU entries (ids set). NULL on OOM. */
Plan *plan_new(const char *name, PlanCollective coll, int ngpus);
void plan_free(Plan *p);                           /* NULL is a no-op */
Plan *plan_clone(const Plan *p);                   /* deep copy; NULL on OOM */
/* A copy of p in which rank r runs the program of rank role[r] (role: a permutation of
 * 0..ngpus-1) and every rank a program names is translated to the rank that now plays it
 * (plan_relabel.c). indexed (a PlanBuf, or -1): the buffer whose chunk c belongs to rank c
 * (gather's output, scatter's input), renumbered alike. NULL with *err on a role that is no
 * permutation, an indexed buffer reached by ranges or by peers, or out of memory. */
Plan *plan_relabel(const Plan *p, const int *role, int indexed, PlanErr *err);
void plan_op_init(PlanOp *op, PlanOpKind kind);    /* zero + defaults (no channel, -1 ranks) */
void plan_op_release(PlanOp *op);                  /* frees a pipeline's inner ops */
PlanOp plan_op_clone(const PlanOp *op, bool *ok);  /* deep copy (pipelines) */
/* Append an op to a TB (deep-copies a pipeline's inner list). false on OOM. */
bool plan_tb_append(PlanTb *tb, const PlanOp *op);
/* Grow a GPU's TB array to at least n entries (new ones empty, ids set). false on OOM. */
bool plan_gpu_ensure_tbs(PlanGpu *g, int n);
/* Append to GPU-level tables; each returns the new index, or -1 on OOM. */
int plan_gpu_add_peer(PlanGpu *g, PlanChanType t, int peer);     /* memory or port */
int plan_gpu_add_switch(PlanGpu *g, PlanBuf buf, const int *ranks, int nranks);
int plan_gpu_add_remote(PlanGpu *g, int rank, PlanBuf type, PlanChanType access); /* dedups */
int plan_gpu_add_semaphore(PlanGpu *g, int init_value);
/* TB-local index of a GPU-level channel/remote id, adding it on first use; -1 if the TB's
 * table (16) is full. */
int plan_tb_use_channel(PlanTb *tb, PlanChanType t, int gpu_channel);
int plan_tb_use_remote(PlanTb *tb, PlanChanType access, int gpu_remote);
/* Number of op slots a TB takes on the device: pipelines count 1 + inner ops (spec §2.8). */
int plan_tb_flat_ops(const PlanTb *tb);

/* ---- JSON (plan_load.c, plan_write.c) --------------------------------------------------- */
/* Parse and fully validate (spec §2, §2.7, §2.8, §6.2). `what` names the source in messages
 * (a path, or "<memory>"). Returns NULL and fills err on any problem; never aborts. */
Plan *plan_parse(const char *text, size_t len, const char *what, PlanErr *err);
Plan *plan_load_file(const char *path, PlanErr *err);
/* cJSON_ParseWithLengthOpts(buf, len, end, require NUL-terminated) under the lock every cJSON
 * parse of the process takes: cJSON writes a process-global error position on each parse. */
struct cJSON;
struct cJSON *plan_cjson_parse(const char *buf, size_t len, const char **end);
/* Validate a model built in memory (the compiler calls this before emitting). */
bool plan_validate(const Plan *p, const char *what, PlanErr *err);
/* Serialise in MSCCL++ DSL key order (spec §2). compact: no whitespace. Returns malloc'd
 * text (free with free()), NULL on OOM. `producer` (may be NULL) becomes a "producer" key. */
char *plan_to_json(const Plan *p, bool compact, const char *producer);
/* The exact length of plan_to_json's text (without the newline plan_write_file adds), counted
 * without building it. */
size_t plan_json_size(const Plan *p, bool compact, const char *producer);
/* The bytes one top-level op adds to its thread block's "ops" list in that text (separator and
 * indentation included): what a plan grows by as the compiler lowers an op. */
size_t plan_json_op_size(const PlanOp *op, bool compact);
/* Write the plan text (plus a newline) to `path`. A new path or a regular file is written
 * atomically: a temporary file in the same directory, renamed over it (a failure never leaves a
 * partial file; an existing file keeps its permission bits). A symbolic link is followed: a
 * regular target is replaced the same way in the target's directory, and the link stays. A
 * character device or FIFO (/dev/null, a named pipe), and /dev/stdout, /dev/stderr, /dev/fd/N,
 * are written straight, never replaced. Anything else (a directory, a dangling link) fails. */
bool plan_write_file(const Plan *p, const char *path, bool compact, const char *producer,
                     PlanErr *err);

/* ---- chunk geometry (plan_geom.c; spec §3) -------------------------------------------- */
typedef struct {
    uint64_t in_bytes, out_bytes;  /* message sizes as the executor sees them */
    uint64_t chunk_bytes;          /* S/C: bytes of one chunk, same for i, o and s */
    uint64_t scratch_bytes;        /* per-context scratch incl. LL x2 and double-buffer x2 */
    uint64_t scratch_half;         /* offset of the odd launches' half, 0 if not doubled */
} PlanGeom;
/* Sizes for one call of rank `rank` (in/out in bytes). Checks alignment, chunk divisibility,
 * min/max and consistency (§3.2) with messages naming the sizes. */
bool plan_geom(const Plan *p, int rank, uint64_t in_bytes, uint64_t out_bytes, PlanGeom *g,
               PlanErr *err);
/* §3.5 scratch of rank `rank` for chunks of `chunk` bytes (not reuse_resources): scratch_chunks
 * chunks, x2 for LL packets, x2 again when double-buffered, each half rounded up to the plan's
 * alignment and to `half_align` (0 or a power of two). plan_geom passes 0, the spec's exact size
 * (chunks are multiples of the alignment, so the halves are exact), which the CPU backend
 * enforces; the GPU executor sizes chunks from the allocation ranges (exec_scratch_bytes) and
 * passes 256, so the second half keeps the device's vector and packet alignment. */
uint64_t plan_scratch_bytes(const Plan *p, int rank, uint64_t chunk, uint64_t half_align);
/* Pieces (plan_pieces.c): a message of an elementwise collective (allreduce, broadcast, reduce:
 * bytes [a, b) of the output depend on bytes [a, b) of the inputs only) whose chunks would put
 * the executor's 32-bit op offsets beyond 4 GiB runs as consecutive pieces of the buffers.
 * plan_piece_bytes gives the piece for a call of in_bytes (= out_bytes): 0 when the whole call
 * fits (or the collective is not elementwise, or no piece fits: plan_geom then says why), else
 * the largest size every rank's geometry accepts, a multiple of every rank's alignment x chunk
 * count, such that the last piece is accepted too. */
bool plan_elementwise(const Plan *p);
uint64_t plan_piece_bytes(const Plan *p, uint64_t in_bytes);
/* Input/output byte counts of one rank for a message of `bytes` as nccl-tests counts it
 * (allgather, gather: bytes is the output; reducescatter, scatter: the input; others: both). */
void plan_call_sizes(const Plan *p, uint64_t bytes, uint64_t *in_bytes, uint64_t *out_bytes);

/* ---- who writes what (plan_writers.c) ----------------------------------------------------- */
typedef struct {
    int rank, tb, op;              /* the op: gpus[rank].threadblocks[tb].ops[op] */
    int inner;                     /* index inside that pipeline op, or -1 */
    PlanOpKind kind;
} PlanWriter;
/* The ops that write chunk `chunk` of buffer `buf` of rank `owner` (locally or through a
 * channel; switch channels are not attributed), the last one in program order of each thread
 * block, in rank and thread-block order. Fills out[0..max) and returns how many there are. */
int plan_chunk_writers(const Plan *p, int owner, PlanBuf buf, uint64_t chunk, PlanWriter *out,
                       int max);

/* ---- human view (plan_dump.c) ------------------------------------------------------------ */
#include <stdio.h>
void plan_dump_table(const Plan *p, FILE *out);
void plan_dump_summary(const Plan *p, FILE *out);   /* the table's header and one line per rank */
void plan_dump_dot(const Plan *p, FILE *out);

/* ---- printing a plan's strings (plan_escape.c) ------------------------------------------ */
/* A plan's strings (name, collective, tags, JSON text a message quotes) come from its file and
 * may hold escape sequences, control characters or invalid UTF-8: print them only through
 * these. Backslash, tab, newline and CR become \\, \t, \n, \r; other C0 controls, DEL and
 * bytes that are not UTF-8 become \xNN; C1 controls and the bidirectional/line-separator
 * format controls become \uNNNN; printable ASCII and the rest of valid UTF-8 stay. NULL prints
 * as "(null)". */
/* Into buf (n bytes, NUL-terminated), cut at a character boundary and ended with "..." when too
 * long; returns buf. */
const char *plan_escape(char *buf, size_t n, const char *s);
/* The whole escaped string, to out. */
void plan_escape_fputs(const char *s, FILE *out);
/* For a message argument: plan_escape into a buffer that lives until the end of the enclosing
 * block (a compound literal), as in rt_fail(..., "plan '%s'", PLAN_ESC(p->name)). */
#define PLAN_ESC_MAX 256
#define PLAN_ESC(s) plan_escape((char[PLAN_ESC_MAX]){0}, PLAN_ESC_MAX, (s))

#endif
