/*
 * algo_native_net.h - the native context's packet areas for peers on other nodes
 * (algo_native_net.c): the outgoing packets a kernel writes for the proxy to send, and the
 * incoming packet slots the network receives into, both in pinned host memory the GPU maps
 * where it can be had.
 */
#ifndef MSCCLRT_ALGO_NATIVE_NET_H
#define MSCCLRT_ALGO_NATIVE_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/exec.h"

/* The outgoing packets to peers on other nodes (MnContext.pk_out, `bytes` of them): *host (kept
 * if set already) gets pinned host memory the kernels write through its mapping and the
 * transport sends from as it is (net_reg_host_src: no staging copy), up to 64 MiB; it stays
 * NULL where that memory cannot be had or x has no network, and the caller keeps its scratch
 * area. An error only where the registration failed. */
mscclrt_result native_net_pk_out(mscclrt_comm *c, ExecCtx *x, uint64_t bytes, void **host);

/* The incoming packet slots for peers on other nodes (MnContext.pk_in_host and peer_pk).
 * Collective: every rank of c, a communicator that spans nodes, calls it once, after its
 * executor context x is set up. want: this rank keeps such slots in host memory (where the
 * network stages device memory, MSCCLRT_NATIVE_NET_PK_HOST); each rank then allocates `bytes`
 * of pinned host memory the GPU maps, registers it for receives (net_reg_host) and sends its
 * descriptor to every rank on another node (an empty one where it has none), and imports
 * theirs. *host: this rank's slots (NULL: the scratch's packet area); win[q] (n entries,
 * zeroed by the caller): for rank q on another node the window of its slots, 0 where it keeps
 * them in its scratch. */
mscclrt_result native_net_pk_in(mscclrt_comm *c, ExecCtx *x, uint64_t bytes, bool want, void **host,
                                uint64_t *win);

#endif
