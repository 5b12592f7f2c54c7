/*
 * algo_p2pcoll.h - collectives composed of grouped send/recv (algo_p2pcoll.c): on a
 * communicator that spans nodes, what no algorithm serves (in-place alltoall, sizes the
 * multi-node programs do not fit) still runs, as one group of send/recv pairs on the native
 * send/recv kernel, which reaches every rank of every node.
 */
#ifndef MSCCLRT_ALGO_P2PCOLL_H
#define MSCCLRT_ALGO_P2PCOLL_H

#include <stdbool.h>
#include <stdint.h>

#include "mscclrt.h"

/* One send or receive of rank `rank`'s part of a composed collective. A send reads
 * sendbuf + off (or, with staged, the staging copy of sendbuf + off); a receive writes
 * recvbuf + off. The k-th send to a peer pairs with that peer's k-th receive from this rank,
 * which the order of the steps keeps on every rank. */
typedef struct P2pStep {
    int peer;
    bool recv;
    bool staged;
    uint64_t off, bytes;
} P2pStep;

/* Rank `rank`'s steps of q (collective, root, in_bytes/out_bytes, sendbuf/recvbuf) among n
 * ranks into out (room for max): their count, 0 for nothing to move, or -1 when q's
 * collective is not composed of send/recv (the reductions) or needs more than max steps. */
int p2pcoll_steps(const mscclrt_request *q, int n, int rank, P2pStep *out, int max);

/* Whether c serves q as composed send/recv: c spans nodes, its native send/recv reaches every
 * rank, and q's collective composes (allgather, alltoall, broadcast, gather, scatter). */
bool algo_p2pcoll_serves(mscclrt_comm *c, const mscclrt_request *q);
/* The sizes up to which calls go composed before any plan is considered (0: never). */
typedef struct P2pFirst {
    uint64_t rooted;     /* broadcast, gather, scatter (MSCCLRT_P2PCOLL_BYTES): one side of each
                            pair only sends, so the multi-node plans pay a handshake and two
                            hops where the send/recv kernel pays one */
    uint64_t alltoall;   /* MSCCLRT_P2PCOLL_ALLTOALL_BYTES (default 0: measured level with the
                            plans at 64 KiB-1 MiB across two nodes of one GPU, c70/c71) */
    uint64_t allgather;  /* MSCCLRT_P2PCOLL_ALLGATHER_BYTES (p2pcoll_allgather_limit) */
} P2pFirst;

/* The allgather limit of P2pFirst from MSCCLRT_P2PCOLL_ALLGATHER_BYTES (`setting`) and the
 * layout (ranks per node, 0 where nodes differ; the same on every rank): a setting of 0 or more
 * as it is; -1 (default) P2PCOLL_ALLGATHER_AUTO_BYTES where every node holds one rank - there
 * an allgather is one send/recv of the input with each peer - else 0 (unmeasured). */
#define P2PCOLL_ALLGATHER_AUTO_BYTES (1ull << 20)
uint64_t p2pcoll_allgather_limit(long long setting, int ranks_per_node);

/* Whether q goes composed before any plan is considered: its collective's size in `first`
 * covers its message. The same on every rank: the size and collective are the call's. */
bool algo_p2pcoll_first(const mscclrt_request *q, const P2pFirst *first);
/* Runs q (filled as for selection) as one group of send/recv on q->stream; in-place alltoall
 * first copies its buffer into the communicator's staging memory (grown as needed, kept). */
mscclrt_result algo_p2pcoll_run(mscclrt_comm *c, const mscclrt_request *q, const char *fn);
/* Frees c's staging memory (the comm's release, its context current). */
void algo_p2pcoll_free(mscclrt_comm *c);

#endif
