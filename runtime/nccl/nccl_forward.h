/*
 * nccl_forward.h - the real NCCL behind the drop-in: libnccl.so.2 loaded with dlopen from
 * MSCCLRT_NCCL_LIB_PATH, once per process, into a table of function pointers generated from
 * nccl_funcs.def; and MSCCLRT_FORCE_NCCL, the collectives the drop-in hands to it.
 *
 * Thread safety: nccl_real(), nccl_real_why() and nccl_force_mask() may be called from any
 * thread at any time; the table they return is filled once and never changes or goes away (the
 * real library is never unloaded: its threads may outlive any point where we could close it).
 * Nothing here exits or aborts; every failure comes back as a result and a reason string.
 */
#ifndef MSCCLRT_NCCL_FORWARD_H
#define MSCCLRT_NCCL_FORWARD_H

#include "nccl/nccl_abi.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* The real library's functions: one member per row of nccl_funcs.def, named after it. A
 * function the library does not export (an older NCCL) is NULL; calling through it is the
 * caller's bug, so check first (nccl_forward_explain words the message). */
typedef struct NcclReal {
#define NCCL_FN(ret, name, params, args) ret (*name) params;
#include "nccl/nccl_funcs.def"
    void *handle;               /* dlopen handle, owned (nccl_forward_close) */
    int version;                /* what its ncclGetVersion reported, e.g. 22809 */
    int missing;                /* rows of nccl_funcs.def it does not export */
    bool deepbind;              /* loaded with RTLD_DEEPBIND (not under a sanitizer runtime) */
    char path[PATH_MAX];        /* the resolved file it was loaded from */
} NcclReal;

/* Exported by libmscclrt_nccl.so (it holds "libmscclrt_nccl"): a library that has this symbol is
 * a copy of the drop-in, never the real NCCL. */
NCCL_ABI_EXPORT extern const char ncclMscclrtShim[];

/*
 * Loads the NCCL library at `path` (a file, not a directory or a bare name) into *r with
 * RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND. DEEPBIND makes the real library's calls to its own
 * nccl* functions (it calls them through its PLT) bind to its own definitions: without it they
 * would bind to the drop-in's exports, which come first in the global scope when it is
 * LD_PRELOADed or is libnccl.so.2, and recurse into us. Under a sanitizer runtime (which aborts on
 * DEEPBIND) the flag is left out and r->deepbind is false. Refuses the drop-in itself or any copy
 * of it (ncclMscclrtShim), and a library without ncclGetVersion. On failure *r holds nothing,
 * `why` the reason (naming the path), and the result is ncclInvalidUsage.
 */
ncclResult_t nccl_forward_open(NcclReal *r, const char *path, char *why, size_t why_len);
/* dlclose and clear; for tests (the process-wide table of nccl_real() is never closed). */
void nccl_forward_close(NcclReal *r);

/* The real NCCL of MSCCLRT_NCCL_LIB_PATH, loaded at the first call; NULL when the variable is
 * unset or the library cannot be loaded; nccl_real_why() then says why (else ""). */
const NcclReal *nccl_real(void);
const char *nccl_real_why(void);

/* Words the failure of a call to `fn` that needs the real NCCL: none is loaded (and why), or the
 * loaded one lacks `fn`. E.g. "ncclDevCommCreate needs the real NCCL, and none is loaded:
 * MSCCLRT_NCCL_LIB_PATH is not set". Returns buf. */
char *nccl_forward_explain(char *buf, size_t len, const char *fn);

/* ---- MSCCLRT_FORCE_NCCL --------------------------------------------------------------------- */
/* X(enum suffix, name in the list); bit i of a mask is row i */
#define NCCL_COLLS(X) \
    X(ALLREDUCE, "allreduce") X(ALLGATHER, "allgather") X(REDUCESCATTER, "reducescatter") \
    X(BROADCAST, "broadcast") X(REDUCE, "reduce") X(ALLTOALL, "alltoall") \
    X(GATHER, "gather") X(SCATTER, "scatter") X(SENDRECV, "sendrecv")

enum {
#define NCCL_COLL_BIT(e, s) NCCL_COLL_BIT_##e,
    NCCL_COLLS(NCCL_COLL_BIT)
#undef NCCL_COLL_BIT
    NCCL_COLL_COUNT
};
#define NCCL_COLL(e) (1u << NCCL_COLL_BIT_##e)           /* NCCL_COLL(ALLREDUCE) */
#define NCCL_COLL_ALL ((1u << NCCL_COLL_COUNT) - 1)

/* Parses "allreduce,allgather,..." or "all" (names as in NCCL_COLLS, any case, spaces and empty
 * items ignored; "" is no collective) into *mask. An unknown name is ncclInvalidArgument with
 * `why` naming it and the valid names. */
ncclResult_t nccl_force_parse(const char *list, unsigned *mask, char *why, size_t why_len);
/* MSCCLRT_FORCE_NCCL, parsed once: *mask gets the collectives forced to the real NCCL. A bad
 * value is ncclInvalidArgument on every call, *mask is 0 and *why (if why != NULL) the reason. */
ncclResult_t nccl_force_mask(unsigned *mask, const char **why);

#endif
