/*
 * peermem.h - peer memory: the allocations behind users' own buffers, shared with a
 * communicator's peers lazily, so the built-in collectives can read and write them directly
 * (kernels/native_direct.cuh) with no registration call and no host round trip per call.
 *
 * A rank announces an allocation the first time a call's buffer lies in it (pm_locate): a
 * message with a publication number (1, 2, ... per rank) goes to every peer through a datagram
 * channel (fdpass_post) and never waits. A peer maps what was announced to it when it next
 * polls (pm_poll, at its own next call) into a table of MN_PM_SLOTS entries per rank in device
 * memory that its kernels read, and counts the announcements it has processed (upto). When a rank finds an
 * address of an announced allocation reused by a new allocation (another CUDA buffer id), or
 * an allocation overlapping it, it retires the old one first (a retire message, also numbered),
 * and peers unmap it. Nothing here decides whether a launch goes direct: the kernel does,
 * from the records all ranks exchange (native_abi.h), so ranks never have to agree on the host.
 *
 * Why retiring is safe: an allocation is reused only after it was freed, and cudaFree (or a
 * stream-ordered free) waits for this rank's kernels; a direct kernel ends only after every
 * peer's kernel of the same call stopped touching this rank's buffers. So by the time the
 * retire is sent, no peer kernel can still use the mapping.
 *
 * Shared: memory from cuMemAlloc/cudaMalloc (CUDA IPC handles in the message), cuMem/VMM memory
 * made with POSIX fd handles (ncclMemAlloc's, PyTorch's expandable segments: the fd travels in
 * the same datagram) and, between threads of one process, any device memory. Not shared
 * (pm_locate answers publication 0, and the kernel takes the slot path): memory pools, host
 * memory, VMM memory without fd handles, allocations once MN_PM_SLOTS of this rank's are live.
 *
 * The driver and transport calls go through PmOps, so the bookkeeping runs without a GPU in
 * tests (tests/unit/test_peermem.c). One thread at a time per PeerMem (the comm's).
 */
#ifndef MSCCLRT_PEERMEM_H
#define MSCCLRT_PEERMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "native_abi.h"
#include "mscclrt.h"

typedef struct PmOps {
    /* the allocation holding ptr: its base, size and an identity a new allocation at the same
     * address does not share (the CUDA buffer id) */
    mscclrt_result (*resolve)(void *ctx, uint64_t ptr, uint64_t *base, uint64_t *size, uint64_t *id);
    /* a descriptor of the whole allocation for peers, and the file descriptor that must travel
     * with it (*fd: borrowed until forget; -1: none); an error when it cannot be shared (then
     * it is not shared, and not tried again) */
    mscclrt_result (*describe)(void *ctx, uint64_t base, uint64_t size, IpcDesc *desc, int *fd);
    void (*forget)(void *ctx, uint64_t base);            /* drop what describe cached */
    /* maps a peer's allocation; fd (-1: none) is the one that came with desc, taken over */
    mscclrt_result (*map)(void *ctx, const IpcDesc *desc, int fd, uint64_t *base);
    void (*unmap)(void *ctx, uint64_t base);
    /* the kernels' table: device memory (zeroed), written entry by entry; a write is complete
     * when it returns (the launches after it see it) and never waits for running kernels */
    mscclrt_result (*table_alloc)(void *ctx, size_t bytes, uint64_t *dev);
    mscclrt_result (*table_write)(void *ctx, uint64_t dev, const void *src, size_t bytes);
    void (*table_free)(void *ctx, uint64_t dev);
} PmOps;

/* CUDA and the comm's IPC transport (ctx: the XportIpc); the caller's context is current. */
extern const PmOps pm_cuda_ops;
/* CUDA between the ranks of one process (ctx: a PmLocalRank): peers use the pointer itself,
 * after peer access is enabled. */
typedef struct PmLocalRank { int rank, device; } PmLocalRank;
extern const PmOps pm_local_ops;

typedef struct PeerMem PeerMem;
/* The in-memory channel of the ranks of one process (mscclrt_comm_init_all's group). */
typedef struct PmLocalGroup PmLocalGroup;
PmLocalGroup *pm_local_group_new(int n);   /* NULL: out of memory */
void pm_local_group_drop(PmLocalGroup *g);   /* the maker's reference; NULL is a no-op */

/* Collective over b (every rank calls it): the channel, the table. *out is NULL on every rank
 * when any rank could not make one (the kernels then never go direct, on any rank). */
mscclrt_result pm_create(PeerMem **out, Boot *b, const PmOps *ops, void *ops_ctx);
/* Rank `rank` of a group in one process (every rank of g, one after the other, each with its
 * own CUDA context current; no agreement needed: the caller drops them all if one fails). */
mscclrt_result pm_create_local(PeerMem **out, PmLocalGroup *g, int rank, int nranks,
                               const PmOps *ops, void *ops_ctx);
void pm_destroy(PeerMem *pm);   /* unmaps every peer allocation; NULL is a no-op */

/* Where [ptr, ptr + bytes) lies among this rank's shared allocations, announcing its
 * allocation first if it is new. *pub 0: not shared (the reason is logged once per allocation). */
void pm_locate(PeerMem *pm, const void *ptr, size_t bytes, uint32_t *pub, uint32_t *slot,
               uint64_t *off);
/* Sends announcements that found a peer's queue full, then maps what peers announced. Never
 * waits; a peer that sends something malformed, or whose memory cannot be mapped, is marked
 * (its upto stays 0: no direct launch touches its memory again) and the reason logged. */
void pm_poll(PeerMem *pm);
/* This rank's record of what it has mapped (rec->upto) and the table's device address. */
void pm_direct_args(const PeerMem *pm, MnDirect *d);

/* for tests and logs */
uint32_t pm_upto(const PeerMem *pm, int peer);
bool pm_peer_broken(const PeerMem *pm, int peer);
int pm_live_shares(const PeerMem *pm);

#endif
