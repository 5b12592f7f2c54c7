/*
 * pm_internal.h - what the two halves of peer memory share: this rank's shares (pm_share.c:
 * locate, announce, retire, the outbox) and what peers shared with it (pm_map.c: poll, map,
 * the table the kernels read), and the message both sides speak.
 */
#ifndef MSCCLRT_PM_INTERNAL_H
#define MSCCLRT_PM_INTERNAL_H

#include "peermem/peermem.h"

#define PM_MAGIC 0x4d53504du     /* "MSPM" */
#define PM_VERSION 1
#define PM_KEY 0x706d            /* fdpass key of peer-memory messages */
enum { PM_ANNOUNCE = 1, PM_RETIRE = 2 };

/* One announcement or retirement, as it travels (fdpass_post). */
typedef struct PmMsgWire {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;               /* PM_ANNOUNCE or PM_RETIRE */
    uint32_t pub;                /* publication number: the sender's messages count 1, 2, ... */
    uint32_t slot;               /* < MN_PM_SLOTS: the sender's slot of the allocation */
    IpcDesc desc;                /* PM_ANNOUNCE: the allocation (offset 0, the whole of it) */
} PmMsgWire;
static_assert(sizeof(PmMsgWire) == 16 + sizeof(IpcDesc), "PmMsgWire is a wire format");
static_assert(sizeof(PmMsgWire) <= FDPASS_MSG_MAX, "a PmMsgWire fits one datagram");

/* A channel (pm_chan.c): posts never wait (a full peer queue: *sent false, try later); a
 * message from one sender arrives after the ones it posted before. */
typedef struct PmChanMsg {
    int src;                     /* sending rank (the channel vouches for it) */
    int fd;                      /* a descriptor that came with it, owned by the taker; -1: none */
    bool ok;                     /* the datagram was a PmMsgWire at all (else m is undefined) */
    PmMsgWire m;
} PmChanMsg;
typedef struct PmChan PmChan;
struct PmChan {
    mscclrt_result (*post)(PmChan *ch, int peer, const PmMsgWire *m, int fd, bool *sent);
    mscclrt_result (*take)(PmChan *ch, PmChanMsg *out, bool *got);
    void (*destroy)(PmChan *ch);
};
/* between processes: fdpass over the bootstrap (collective) */
mscclrt_result pm_chan_fdpass(PmChan **out, Boot *b);
/* inside one process: rank's end of a group's in-memory queues (takes a reference on g) */
mscclrt_result pm_chan_local(PmChan **out, PmLocalGroup *g, int rank);

typedef struct PmShare {         /* an allocation of this rank that peers may map */
    uint64_t base, size, id;
    uint32_t pub;                /* its announcement */
    bool live;
} PmShare;

#define PM_REFUSED 16
typedef struct PmRefused {       /* allocations that cannot be shared (not retried) */
    uint64_t base, id;
} PmRefused;

typedef struct PmOutbox {        /* messages to one peer that found its queue full, in order */
    PmMsgWire *v;
    int *fd;                     /* owned duplicates of the fds that go with them (-1: none) */
    int head, n, cap;
} PmOutbox;

typedef struct PmPeer {          /* what one peer shared with this rank */
    uint32_t upto;               /* its messages processed, in order */
    bool broken;                 /* it sent something wrong, or its memory would not map */
    uint64_t mapped[MN_PM_SLOTS];/* our mapping of its slot (0: none) */
} PmPeer;

struct PeerMem {
    Boot *boot;                  /* borrowed */
    PmChan *chan;                /* owned: the channel of PmMsgWire */
    const PmOps *ops;
    void *ops_ctx;
    int rank, nranks;
    /* this rank's side */
    PmShare share[MN_PM_SLOTS];
    uint32_t last_pub;
    PmRefused refused[PM_REFUSED];
    int nrefused;
    bool warned_full;
    PmOutbox *out;               /* [nranks] */
    /* the peers' side */
    PmPeer *peer;                /* [nranks] */
    MnPeerMem *table;            /* host copy of [nranks][MN_PM_SLOTS] */
    uint64_t table_dev;          /* the kernels' (ops->table_alloc) */
};

/* Whether q's message m may be applied (pm_wire.c): upto is how many of q's messages this rank
 * applied, mapped[MN_PM_SLOTS] what it holds of q's slots (0: empty); why (n bytes) says what
 * is wrong otherwise. An announcement's descriptor is checked further by the transport. */
bool pm_msg_check(const PmMsgWire *m, int q, uint32_t upto, const uint64_t *mapped, char *why,
                  size_t n);

/* queues m (and a duplicate of fd for each peer, unless -1) for every peer and sends what it
 * can (pm_share.c) */
void pm_broadcast(PeerMem *pm, const PmMsgWire *m, int fd);
void pm_flush(PeerMem *pm);

#endif
