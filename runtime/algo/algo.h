/*
 * algo.h - the algorithm layer between the NCCL-shaped API and the executor: what an algorithm
 * is inside libmscclrt (a plan or native CUDA source plus its description), the process-wide
 * collection and the one selector (algo_registry.c), the default collection built for a
 * communicator's real layout from the embedded stdlib and the default selector with its
 * tuning table (algo_default.c, algo_plan_cache.c, algo_select_default.c, algo_tuning.c), native algorithms' contexts and launches
 * (algo_native.c), and the collective calls themselves, point-to-point, PreMulSum operators and
 * windows (algo_coll.c).
 *
 * Ownership: an algorithm is reference counted (creator, registry, each communicator's
 * default collection); it is freed when the last reference goes. Contexts that communicators
 * hold for an algorithm are found through the comm (runtime/exec), never through the algorithm.
 */
#ifndef MSCCLRT_ALGO_H
#define MSCCLRT_ALGO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mscclrt.h"
#include "native_abi.h"
#include "plan.h"

#define ALGO_MAGIC 0x4f474c41u /* "ALGO" */

struct mscclrt_algo {
    uint32_t magic;                /* ALGO_MAGIC while live */
    int refs;                      /* atomic */
    mscclrt_algo_kind kind;
    mscclrt_algo_desc desc;        /* name and tags owned (copies) */
    uint64_t generation;           /* bumped by clean_cached_contexts: comms drop older contexts */
    /* plan-based */
    const mscclrt_plan *plan;      /* borrowed from the creator, or owned when own_plan */
    bool own_plan;
    bool needs_symmetric;          /* the plan reads/writes peers' input/output buffers: usable
                                      only when both buffers lie in registered windows */
    /* native */
    char *source;                  /* owned CUDA source */
    char *kernel;                  /* owned kernel name */
    bool reduces;                  /* compiled per (dtype, op); else once */
    int default_blocks, default_threads;
};

/* One remembered selection (algo_coll.c): the request's shape (never its pointers or stream), the
 * registry epoch it was made at, the choice, and for native choices the resolved kernel and
 * grid, so a repeated call only fills arguments and launches. */
typedef struct AlgoSel {
    bool valid;
    uint64_t epoch;
    uint64_t gen;                  /* ran's generation when stored */
    mscclrt_coll coll;
    uint64_t msg, in, out;
    int dtype, op, root, inplace, symmetric, capturing;
    mscclrt_choice choice;
    const mscclrt_algo *ran;       /* what actually ran (a plan's native stand-in, see algo_coll.c) */
    void *fn;                      /* native: the CuFunction */
    int blocks, threads;
    bool direct;                   /* native: fn is the direct kernel */
    bool own;                      /* native: fn is a built-in kernel (NativeLaunch.own) */
} AlgoSel;
#define ALGO_SEL_CACHE 8

/* Per-communicator state of the algorithm layer (owned by the comm: mscclrt_comm.algo). */
typedef struct AlgoSet AlgoSet;
typedef struct NativeCtx NativeCtx;
typedef struct AlgoWindow AlgoWindow;
typedef struct AlgoPremul AlgoPremul;
typedef struct AlgoComm {
    int ranks_per_node;            /* ranks on this rank's host (bootstrap host ids) */
    AlgoSet *defaults;             /* the default collection, built on first use */
    struct AlgoRooted *rooted;     /* its root-0 programs made for other roots (algo_rooted.c) */
    NativeCtx *native;             /* built-in native algorithms' context (algo_native.c) */
    AlgoWindow *windows;           /* registered windows (algo_coll.c) */
    AlgoPremul *premul;            /* PreMulSum operators: [npremul] (algo_coll.c) */
    int npremul;
    struct NativeLaunch *p2p_open; /* the send/recv launch the open group is filling (algo_coll.c) */
    struct P2pStage *p2p_stage;    /* in-place alltoall's staging across nodes (algo_p2pcoll.c) */
    AlgoSel sel[ALGO_SEL_CACHE];   /* recent selections, most recent at sel_next - 1 (algo_coll.c) */
    int sel_next;
    void *last_stream;             /* the stream of the comm's previous call (algo_coll.c) */
    bool stream_used;
    void *order_event;             /* CuEvent ordering a call on another stream after it */
    struct AlgoGen *gens;          /* plan-based algorithms run here and the generation their
                                      contexts belong to (mscclrt_algo_clean_cached_contexts) */
    int ngens;
    /* mscclrt-perf's reference (algo_record_launches): off unless asked, so calls write nothing
     * for it; then the last native launch outside a group (NULL fn after a plan ran) */
    bool record;
    struct { void *fn; int blocks, threads; MnArgs args; } last;
} AlgoComm;

/* The previous call's launch as bare cuLaunchKernel pieces: mscclrt-perf replays it to show the
 * library's own host cost per call. Native launches are kept only once algo_record_launches(c,
 * true) ran; a plan's is the executor's hot entry. out holds its own copy of the arguments;
 * MSCCLRT_ERR_UNAVAILABLE when there is no previous launch to give. */
typedef struct AlgoBareLaunch {
    void *fn;
    int blocks, threads;
    void *params[2];               /* point into this struct or into the executor's context */
    MnArgs args;
    MnP2pList list;
} AlgoBareLaunch;
mscclrt_result algo_record_launches(mscclrt_comm *c, bool on);
mscclrt_result algo_last_launch(mscclrt_comm *c, AlgoBareLaunch *out);
/* The value of tag `key` ("key=value" in "a=1,b=2") as an integer; false when absent or not an
 * integer (algo_registry.c). */
bool algo_tag_int(const char *tags, const char *key, long *out);

/* algo_rooted.c: rooted collectives across nodes for roots other than 0. Whether req is one
 * they serve (broadcast, reduce, gather or scatter, root > 0, several nodes of equal size); the permutation that
 * makes `root` play rank 0 of a plan for n ranks in nodes of g, keeping nodes together; the
 * comm's root-k forms of the collection's root-0 algorithms of req's collective (made on first
 * use, kept until the comm goes: *out stays valid); and their release. */
bool algo_rooted_serves(const mscclrt_request *req);
void algo_rooted_roles(int n, int g, int root, int *role);
/* The root-`root` forms of defs' root-0 plans of coll for nodes of rpn into v (room for
 * defs->n), *n of them, each a new reference; none on failure. */
mscclrt_result algo_rooted_make(const AlgoSet *defs, mscclrt_coll coll, int root, int rpn,
                                mscclrt_algo **v, int *n);
mscclrt_result algo_rooted_candidates(mscclrt_comm *c, const AlgoSet *defs,
                                      const mscclrt_request *req, mscclrt_algo *const **out,
                                      int *n);
void algo_rooted_free(AlgoComm *a);

/* The comm's algorithm state, created on first use (NULL only on out of memory, with the error
 * set); freed by algo_comm_free from comm_release (runtime/comm). */
AlgoComm *algo_comm(mscclrt_comm *c);
void algo_comm_free(mscclrt_comm *c);

/* algo_coll.c: PreMulSum operators and windows of a comm released with it. */
void algo_coll_free(mscclrt_comm *c);

/* ---- algo_registry.c: construction, the collection, the selector -------------------------- */
void algo_retain(const mscclrt_algo *a);
void algo_release(const mscclrt_algo *a);
/* A live algorithm, or NULL (a freed handle, NULL, bad magic). */
const mscclrt_algo *algo_check(const mscclrt_algo *a);
/* "allreduce" ... "sendrecv" -> value, without setting an error (false when unknown). */
bool algo_coll_from_name(const char *name, mscclrt_coll *out);
/* Whether a can serve req (collective, size range, arch, world size, ranks per node, buffer
 * mode, symmetric buffers for needs_symmetric plans, a plan's root (tag "root=K", else 0) for
 * rooted collectives, the plan's own size rules: the message's input/output bytes as
 * mscclrt_plan_call_sizes counts them, every rank's chunk geometry, whole elements per chunk for
 * reductions). On false, *why (may be NULL) names the first mismatch; the text lives in a
 * per-thread buffer, valid until this thread's next algo_fits. Sets no error. */
bool algo_fits(const mscclrt_algo *a, const mscclrt_request *req, const char **why);
/* The selection chain for one request on a communicator: the user's selector over the
 * candidates (registered, then defaults), else the default selector. Fills *choice; fails
 * with MSCCLRT_ERR_UNAVAILABLE when nothing fits (the NCCL layer then forwards). choice->algo
 * is borrowed: a registered algorithm lives until unregistered, a default one as long as comm;
 * retain it (algo_retain) to keep it past either. */
mscclrt_result algo_select(mscclrt_comm *comm, const mscclrt_request *req, mscclrt_choice *choice);
/* algo_select, except that when no algorithm fits it sets *none and returns
 * MSCCLRT_ERR_UNAVAILABLE without recording or logging an error: for a caller that serves
 * such calls another way (algo_coll.c across nodes). */
mscclrt_result algo_select_quiet(mscclrt_comm *comm, const mscclrt_request *req,
                                 mscclrt_choice *choice, bool *none);
/* The chain's core, with no communicator: cand[0..n) are algorithms that fit req, in selection
 * order. The user's selector (1: its choice is checked: the algorithm must fit req, blocks in
 * 0..1024, threads 0 or a multiple of 32 up to 1024; 0: no opinion), else the default
 * selector. Fails when n is 0 (MSCCLRT_ERR_UNAVAILABLE), or when the selector's answer is
 * unusable (naming it). */
mscclrt_result algo_select_from(const mscclrt_request *req, const mscclrt_algo *const *cand,
                                int n, mscclrt_choice *choice);
/* Whether a is in the process-wide collection now. */
bool algo_is_registered(const mscclrt_algo *a);
/* Counts changes of the collection and of the selector (register, unregister, set_selector):
 * a choice cached at an older epoch may be stale. */
uint64_t algo_registry_epoch(void);
/* Invalidates every communicator's cached selections (the tuning table changed). */
void algo_registry_bump_epoch(void);

/* ---- algo_default.c, algo_plan_cache.c, algo_select_default.c: the default collection, its plan
 * cache and the default selector ------------------------------------------------------------ */
/* The communicator's default collection (built on first use for its world size, ranks per
 * node and architecture: stdlib plans compiled in process through libmscclc, cached on disk,
 * plus the built-in native algorithms); borrowed, lives as long as the comm. */
struct AlgoSet {
    int n;
    const mscclrt_algo **v;        /* references held; capacity: n rounded up to a power of two */
};
mscclrt_result algo_default_set(mscclrt_comm *comm, const AlgoSet **out);
/* Appends a, taking over the caller's reference (released on failure too). */
mscclrt_result algo_set_add(AlgoSet *s, const mscclrt_algo *a);
void algo_set_free(AlgoSet *s);                /* releases every member; NULL is a no-op */
/* The default collection for a layout, built from nothing (no communicator): the stdlib plans
 * (algo_default_build_plans with the cache of MSCCLRT_CACHE_DIR), then the built-in native
 * algorithms (algo_native_builtins). *out is owned by the caller (algo_set_free). */
mscclrt_result algo_default_build(int world, int ranks_per_node, int arch, AlgoSet **out);
/* Its plan part. Every embedded stdlib program that accepts N = world is compiled in process
 * (libmscclc) and wrapped as "stdlib/<collective>/<name>" (tags "default=1" and the plan's
 * own): on one node (ranks_per_node == world) the single-node programs, across nodes
 * (0 < ranks_per_node < world) the multi-node ones (those with a `param G`, compiled with
 * G = ranks_per_node) whose plans keep memory and switch channels inside a node
 * (algo_plan_crosses_nodes); ranks_per_node 0 (nodes of different sizes) builds none. A program
 * that refuses N, or whose plan would cross nodes over NVLink, is skipped (INFO). Plans are cached in memory per process and on disk under
 * cache_dir/plans ("" disables the disk; an untrusted directory too, with a WARN), keyed by the source, the defines and the compiler's
 * identity. arch is kept for architecture-specific programs (the stdlib has none yet). */
typedef struct AlgoBuildStats {
    int compiled, cached, skipped; /* plans compiled now, taken from a cache, programs refused */
    double seconds;                /* wall time of the whole build */
} AlgoBuildStats;
mscclrt_result algo_default_build_plans(int world, int ranks_per_node, int arch,
                                        const char *cache_dir, AlgoSet *set,
                                        AlgoBuildStats *stats);  /* stats may be NULL */
/* The plan cache directory for a MSCCLRT_CACHE_DIR value (core/disk_cache.c's dcache_root):
 * "none" -> "" (disabled), "" -> $XDG_CACHE_HOME/mscclrt when absolute, else
 * $HOME/.cache/mscclrt ("" without HOME), else the value. The directory and its plans/ are used
 * only when trusted (owned by the user, not writable by others; disk_cache.h). */
void algo_plan_cache_dir(const char *setting, char *out, size_t n);
/* Whether plan p, on nodes of rpn ranks (rank r on node r / rpn), reaches a rank of another
 * node by NVLink means (a memory channel, a buffer mapped for memory access, a switch group);
 * only port channels may cross nodes. When it does, why says where (n bytes). */
bool algo_plan_crosses_nodes(const Plan *p, int rpn, char *why, size_t n);
/* Whether the embedded stdlib has program "<collective>/<name>" (e.g. "allreduce/hier"). */
bool algo_stdlib_has(const char *coll_slash_name);
/* algo_native.c: appends the built-in native algorithms ("native/<collective>", any size,
 * any buffer mode) for a world of this size to set. */
/* Across nodes (ranks_per_node != world) native/sendrecv only: the native context maps the
 * scratch of this node's ranks through CUDA IPC and reaches the other nodes' ranks through the
 * port proxy, so it serves send/recv between any two; the built-in collectives are no
 * candidates there, only algo_coll.c's fallback where no program fits (without the proxy,
 * send/recv to another node's rank is refused, MSCCLRT_ERR_UNAVAILABLE). */
mscclrt_result algo_native_builtins(AlgoSet *set, int world, int ranks_per_node);
typedef struct AlgoTuning AlgoTuning;
/* The default selector (algo_select_default.c), with the tuning table t (NULL: none): t's row for
 * req, else the first registered candidate (plan-based before native), else the size
 * heuristics, else native/<collective> (only on one node: req->ranks_per_node ==
 * req->world_size), else the first candidate. Deterministic in (req's collective,
 * message_bytes, dtype, op, world_size, ranks_per_node, arch, root, inplace, symmetric) and the
 * collection: the same on every rank. false only when n is 0. */
bool algo_default_select_with(const AlgoTuning *t, const mscclrt_request *req,
                              const mscclrt_algo *const *cand, int n, mscclrt_choice *choice);

/* ---- algo_tuning.c: the tuning table (format: libmscclrt(3), TUNING TABLE) ---------------- */
/* Parses and validates a table; errors name `what`, the entry and the field. */
mscclrt_result algo_tuning_parse(const char *text, size_t len, const char *what,
                                 AlgoTuning **out);
mscclrt_result algo_tuning_load(const char *path, AlgoTuning **out);
void algo_tuning_free(AlgoTuning *t);          /* NULL is a no-op */
int algo_tuning_count(const AlgoTuning *t);    /* entries */
/* The first entry matching req whose algorithm is among cand[0..n): fills *choice. */
bool algo_tuning_choose(const AlgoTuning *t, const mscclrt_request *req,
                        const mscclrt_algo *const *cand, int n, mscclrt_choice *choice);
/* The process's table from MSCCLRT_TUNING_FILE, read once (*out NULL when it is unset, or
 * when the file is missing or bad: then one WARN names it, and the defaults decide). */
mscclrt_result algo_tuning_process(const AlgoTuning **out);

#endif
