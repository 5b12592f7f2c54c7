/*
 * algo_native_net.h - the native context's areas for peers on other nodes (algo_native_net.c):
 * the outgoing packets a kernel writes for the proxy to send, and the incoming packet and Simple
 * slots the network receives into, in pinned host memory the GPU maps where it can be had.
 */
#ifndef MSCCLRT_ALGO_NATIVE_NET_H
#define MSCCLRT_ALGO_NATIVE_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/exec.h"

/* Pinned host memory for one area: at most this much per rank (the scratch stays the fallback
 * beyond) */
#define NATIVE_NET_HOST_MAX (64ull << 20)

/* The kinds of area: packet slots, Simple slots, and the counters of the Simple pieces' data
 * signals and acknowledgements (incoming only) */
typedef enum { NATIVE_NET_PACKETS, NATIVE_NET_SLOTS, NATIVE_NET_COUNTERS } NativeNetArea;

/* An outgoing area for peers on other nodes of `bytes` (the packets, MnContext.pk_out, or the
 * Simple pieces, slot_out): *host (kept if set already) gets pinned host memory the kernels
 * write through its mapping and the transport sends from as it is (net_reg_host_src: no
 * staging copy), up to 64 MiB; it stays NULL where that memory cannot be had or x has no
 * network, and the caller keeps its scratch (packets) or sends from the sources (pieces). An
 * error only where the registration failed. Not collective: the receiver cannot tell. */
mscclrt_result native_net_host_out(mscclrt_comm *c, ExecCtx *x, NativeNetArea kind, uint64_t bytes,
                                   void **host);

/* What a rank receives from peers on other nodes into an area of `bytes` laid out by sender:
 * its packet slots (MnContext.pk_in_host and peer_pk), its Simple slots (slot_in_host and
 * peer_slot) or its counters (ctr_in_host and peer_ctr); `kind` gives the bootstrap tag of the
 * exchange and the log's words.
 * Collective: every rank of c, a communicator that spans nodes, calls it once per kind, after its
 * executor context x is set up. want: this rank keeps that area in host memory (where the
 * network stages device memory); each rank then allocates `bytes` of pinned host memory the GPU
 * maps, registers it for receives (net_reg_host) and sends its descriptor to every rank on
 * another node (an empty one where it has none), and imports theirs. *host: this rank's area
 * (NULL: the scratch's); win[q] (n entries, zeroed by the caller): for rank q on another node
 * the window of its area, 0 where it keeps it in its scratch. A peer offering fewer bytes than
 * this rank's layout is an error naming it. */
mscclrt_result native_net_host_in(mscclrt_comm *c, ExecCtx *x, NativeNetArea kind, uint64_t bytes,
                                  bool want, void **host, uint64_t *win);

#endif
