/*
 * pm_map.c - the peers' side of peer memory: taking their announcements and retirements off
 * the channel in order, mapping and unmapping their allocations, and the table the direct
 * kernels read (an entry is written to the device before the announcement counts as mapped, so
 * a launch whose record says so finds it).
 */
#include "peermem/pm_internal.h"
#include "core/err.h"
#include "core/log.h"

#include <string.h>
#include <unistd.h>

/* sets entry (q, slot) in the host copy and on the device */
static mscclrt_result set_entry(PeerMem *pm, int q, uint32_t slot, uint64_t pub, uint64_t base) {
    const size_t i = (size_t)q * MN_PM_SLOTS + slot;
    pm->table[i] = (MnPeerMem){.pub = pub, .base = base};
    return pm->ops->table_write(pm->ops_ctx, pm->table_dev + i * sizeof(MnPeerMem), &pm->table[i],
                                sizeof(MnPeerMem));
}

/* q sent something this rank cannot follow: no direct launch touches q's memory again (its
 * upto reads 0 in this rank's records from now on) */
static void mark_broken(PeerMem *pm, int q, const char *what) {
    if (!pm->peer[q].broken)
        LOG_WARN("rank %d: peer memory: %s; collectives touching rank %d's buffers take the slot "
                 "path from now on", pm->rank, what, q);
    pm->peer[q].broken = true;
}

/* the message m from q, with the descriptor fd that came with it (-1: none; taken over) */
static void take(PeerMem *pm, int q, const PmMsgWire *m, int fd) {
    PmPeer *pp = &pm->peer[q];
    char why[400];
    if (pp->broken || m->kind != PM_ANNOUNCE) {
        if (fd >= 0) close(fd);   /* only announcements carry one */
        fd = -1;
    }
    if (pp->broken) return;
    if (!pm_msg_check(m, q, pp->upto, pp->mapped, why, sizeof why)) {
        if (fd >= 0) close(fd);
        return mark_broken(pm, q, why);
    }
    if (m->kind == PM_RETIRE) {
        if (set_entry(pm, q, m->slot, 0, 0) != MSCCLRT_SUCCESS) {
            snprintf(why, sizeof why, "clearing rank %d's slot %u: %s", q, m->slot, mscclrt_last_error());
            return mark_broken(pm, q, why);
        }
        pm->ops->unmap(pm->ops_ctx, pp->mapped[m->slot]);
        pp->mapped[m->slot] = 0;
        pp->upto = m->pub;
        return;
    }
    uint64_t base = 0;
    const bool ok = ipc_desc_check(&m->desc, q) == MSCCLRT_SUCCESS;
    if (!ok && fd >= 0) close(fd);
    if (!ok || pm->ops->map(pm->ops_ctx, &m->desc, fd, &base) != MSCCLRT_SUCCESS || !base) {
        snprintf(why, sizeof why, "mapping rank %d's allocation of %llu bytes: %s", q,
                 (unsigned long long)m->desc.size, mscclrt_last_error());
        return mark_broken(pm, q, why);
    }
    pp->mapped[m->slot] = base;
    if (set_entry(pm, q, m->slot, m->pub, base) != MSCCLRT_SUCCESS) {
        snprintf(why, sizeof why, "recording rank %d's slot %u: %s", q, m->slot, mscclrt_last_error());
        return mark_broken(pm, q, why);
    }
    pp->upto = m->pub;
    LOG_TRACE(LOG_SUB_XPORT, "rank %d: peer memory: rank %d's message %u: %llu bytes in slot %u "
              "mapped at %#llx", pm->rank, q, m->pub, (unsigned long long)m->desc.size, m->slot,
              (unsigned long long)base);
}

void pm_poll(PeerMem *pm) {
    pm_flush(pm);
    for (;;) {
        PmChanMsg msg;
        bool got = false;
        if (pm->chan->take(pm->chan, &msg, &got) != MSCCLRT_SUCCESS || !got) return;
        if (!msg.ok || msg.src < 0 || msg.src >= pm->nranks || msg.src == pm->rank) {
            char why[200];
            snprintf(why, sizeof why, "rank %d sent something that is not a peer-memory message",
                     msg.src);
            if (msg.fd >= 0) close(msg.fd);
            if (msg.src >= 0 && msg.src < pm->nranks && msg.src != pm->rank) mark_broken(pm, msg.src, why);
            continue;
        }
        take(pm, msg.src, &msg.m, msg.fd);
    }
}

void pm_direct_args(const PeerMem *pm, MnDirect *d) {
    d->table = pm->table_dev;
    for (int q = 0; q < MN_DIRECT_MAX_RANKS; q++)
        d->rec.upto[q] = q < pm->nranks && !pm->peer[q].broken ? pm->peer[q].upto : 0;
}

uint32_t pm_upto(const PeerMem *pm, int peer) { return pm->peer[peer].upto; }
bool pm_peer_broken(const PeerMem *pm, int peer) { return pm->peer[peer].broken; }
