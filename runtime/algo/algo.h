/*
 * algo.h - the algorithm layer between the NCCL-shaped API and the executor: what an algorithm
 * is inside libmscclrt (a plan or native CUDA source plus its description), the process-wide
 * collection and the one selector (algo_registry.c), the default collection built for a
 * communicator's real layout from the embedded stdlib and the default selector with its
 * tuning table (algo_default.c, algo_tuning.c), native algorithms' contexts and launches
 * (algo_native.c), and the collective calls themselves (coll.c, p2p.c).
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

/* Per-communicator state of the algorithm layer (owned by the comm: mscclrt_comm.algo). */
typedef struct AlgoSet AlgoSet;
typedef struct NativeCtx NativeCtx;
typedef struct AlgoWindow AlgoWindow;
typedef struct AlgoPremul AlgoPremul;
typedef struct AlgoComm {
    int ranks_per_node;            /* ranks on this rank's host (bootstrap host ids) */
    AlgoSet *defaults;             /* the default collection, built on first use */
    NativeCtx *native;             /* built-in native algorithms' context (algo_native.c) */
    AlgoWindow *windows;           /* registered windows (algo_window.c) */
    AlgoPremul *premul;            /* PreMulSum operators: [npremul] (coll.c) */
    int npremul;
    struct NativeLaunch *p2p_open; /* the send/recv launch the open group is filling (coll.c) */
} AlgoComm;
/* The comm's algorithm state, created on first use (NULL only on out of memory, with the error
 * set); freed by algo_comm_free from exec_comm_release. */
AlgoComm *algo_comm(mscclrt_comm *c);
void algo_comm_free(mscclrt_comm *c);

/* coll.c: the launch of a group's send/recv list (an ExecDeferredFn); PreMulSum operators and
 * windows of a comm released with it. */
mscclrt_result algo_p2p_launch(void *arg, bool run);
void algo_coll_free(mscclrt_comm *c);

/* ---- algo_registry.c: construction, the collection, the selector -------------------------- */
void algo_retain(const mscclrt_algo *a);
void algo_release(const mscclrt_algo *a);
/* A live algorithm, or NULL (a freed handle, NULL, bad magic). */
const mscclrt_algo *algo_check(const mscclrt_algo *a);
/* Whether a can serve req (collective, size range, arch, world size, ranks per node, buffer
 * mode, symmetric buffers for needs_symmetric plans, the plan's own size rules). On false,
 * *why (may be NULL) names the first mismatch. */
bool algo_fits(const mscclrt_algo *a, const mscclrt_request *req, const char **why);
/* The selection chain for one request on a communicator: the user's selector over the
 * candidates (registered, then defaults), else the default selector. Fills *choice; fails
 * with MSCCLRT_ERR_UNAVAILABLE when nothing fits (the NCCL layer then forwards). */
mscclrt_result algo_select(mscclrt_comm *comm, const mscclrt_request *req, mscclrt_choice *choice);

/* ---- algo_default.c: the default collection and the default selector ---------------------- */
/* The communicator's default collection (built on first use for its world size, ranks per
 * node and architecture: stdlib plans compiled in process through libmscclc, cached on disk,
 * plus the built-in native algorithms); borrowed, lives as long as the comm. */
struct AlgoSet {
    int n;
    const mscclrt_algo **v;        /* references held */
};
mscclrt_result algo_default_set(mscclrt_comm *comm, const AlgoSet **out);
void algo_set_free(AlgoSet *s);
/* Appends the built-in native algorithms ("native/<collective>", any size and layout) to set
 * (algo_native.c); nothing when MSCCLRT_NATIVE_SCRATCH_BYTES is 0. */
mscclrt_result algo_native_builtins(AlgoSet *set, int world);
/* The default selector: the tuning table (MSCCLRT_TUNING_FILE) if it has a row for req, else
 * the size heuristics. Deterministic in (req's collective, message_bytes, dtype, op,
 * world_size, ranks_per_node, arch, inplace, symmetric): the same on every rank. */
bool algo_default_select(const mscclrt_request *req, const mscclrt_algo *const *cand, int n,
                         mscclrt_choice *choice);

#endif
