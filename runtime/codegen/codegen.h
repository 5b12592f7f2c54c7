/*
 * codegen.h - plan -> CUDA source -> cubin. For one (plan, rank, dtype, operator, packet type)
 * cg_generate writes a kernel in which each thread block's ops are straight-line calls into
 * the device library (kernels/ *.cuh files) with constant buffer, channel and chunk indices; sizes
 * stay run-time arguments (MkArgs). cg_compile turns source into a cubin with NVRTC, through
 * a disk cache ($MSCCLRT_CACHE_DIR, default ~/.cache/mscclrt) shared safely by processes.
 *
 * The per-rank parameter table and device state block are laid out by cg_layout; runtime/exec
 * fills them with the same layout, so generated code and host agree on every offset.
 */
#ifndef MSCCLRT_CODEGEN_H
#define MSCCLRT_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mscclrt.h"
#include "plan.h"
#include "plan_abi.h"

#define CG_KERNEL_NAME "mscclrt_plan_kernel"

/* Layout of one rank's table (second kernel parameter) and state block (plan_abi.h). */
typedef struct CgLayout {
    int ntb;                       /* thread blocks of this rank (grid size) */
    int threads;                   /* block size */
    int nremote[2];                /* remote buffers with memory / port access (per-type count) */
    int nchan[2];                  /* memory / port channels (GPU-level) */
    int nswitch;                   /* switch channels */
    int tab_remote[2];             /* table index of the first memory / port remote buffer */
    int tab_chan[2];               /* table index of the first memory / port channel */
    int tab_switch;                /* table index of the first switch channel */
    int tab_proxy;                 /* table index of the rank's MkFifo; -1: no port proxy */
    int ntab;                      /* table entries (>= 1) */
    int nslots;                    /* inbound counters incl. fillers for unpaired peers */
    size_t off_flags, off_inbound, off_expected, off_sem, off_bar;  /* bytes into the state */
    size_t state_bytes;            /* whole state block (zeroed at setup, then semaphores) */
    bool uses_flag;                /* kernel reads/writes tb_flag (packets or double scratch) */
    bool has_reduce;               /* some rank's ops combine values */
    bool has_packets;              /* this rank has packet ops */
    bool has_switch;               /* this rank uses switch channels (needs NVLS) */
    bool uses_proxy;               /* port ops go through the host proxy (tab_proxy >= 0) */
} CgLayout;

mscclrt_result cg_layout(const Plan *p, int rank, CgLayout *out);
/* Inbound counter slot on rank `owner` that receives the signals of the k-th channel of type
 * t (0 memory, 1 port) from `from` to `owner` (spec §6.2 pairing: k-th <-> k-th occurrence;
 * unpaired channels land in filler slots). -1 if `from` has no such channel. */
int cg_inbound_slot(const Plan *p, int owner, int t, int from, int k);
/* Index into rank r's expected[] / inbound[] of its own GPU-level channel c of type t. */
int cg_chan_counter(const CgLayout *l, int t, int c);

/* Kernel source for one rank. *src is malloc'd (caller frees). Fails (MSCCLRT_ERR_PLAN or
 * MSCCLRT_ERR_INVALID_ARG) naming plan, rank, TB and op when the combination cannot run,
 * e.g. LL8 packets with 8-byte reductions or multimem with an unsupported dtype/operator. */
mscclrt_result cg_generate(const Plan *p, int rank, mscclrt_dtype dt, mscclrt_redop op,
                           mscclrt_packet pk, char **src);

/* NVRTC compile for sm_<arch> through the disk cache. *cubin is malloc'd. *cached tells
 * whether it came from the cache (may be NULL). `what` names the kernel in errors. */
mscclrt_result cg_compile(const char *src, int arch, const char *what, void **cubin,
                          size_t *len, bool *cached);

/* Front-end check only (NVRTC to PTX for compute_<arch>, no ptxas, no cache): fast, for CI
 * sweeps over many plans. */
mscclrt_result cg_check_source(const char *src, int arch, const char *what);

/* The device library's element type of a dtype ("float", "mk::bf16", ...); NULL if invalid. */
const char *cg_ctype(mscclrt_dtype t);

/* 64-bit FNV-1a, exposed for cache keys of callers. */
uint64_t cg_hash(const void *data, size_t n, uint64_t seed);

#endif
