/*
 * pm_share.c - this rank's side of peer memory: a PeerMem's making and ending, finding the
 * allocation behind a call's buffer (pm_locate), announcing new allocations and retiring
 * reused ones, and the outbox that keeps messages a full peer queue could not take yet.
 */
#include "peermem/pm_internal.h"
#include "core/err.h"
#include "core/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- making and ending -------------------------------------------------------------------- */
void pm_destroy(PeerMem *pm) {
    if (!pm) return;
    for (int q = 0; pm->peer && q < pm->nranks; q++)
        for (int s = 0; s < MN_PM_SLOTS; s++)
            if (pm->peer[q].mapped[s]) pm->ops->unmap(pm->ops_ctx, pm->peer[q].mapped[s]);
    for (int s = 0; s < MN_PM_SLOTS; s++)
        if (pm->share[s].live) pm->ops->forget(pm->ops_ctx, pm->share[s].base);
    for (int q = 0; pm->out && q < pm->nranks; q++) {
        PmOutbox *o = &pm->out[q];
        for (int i = o->head; i < o->n; i++)
            if (o->fd[i] >= 0) close(o->fd[i]);
        free(o->v);
        free(o->fd);
    }
    if (pm->table_dev) pm->ops->table_free(pm->ops_ctx, pm->table_dev);
    free(pm->table);
    if (pm->chan) pm->chan->destroy(pm->chan);
    free(pm->out);
    free(pm->peer);
    free(pm);
}

/* A PeerMem without its channel; *why says when it cannot have one (then the caller destroys
 * it). NULL: out of memory. */
static PeerMem *pm_new(int rank, int n, const PmOps *ops, void *ops_ctx, char *why, size_t wn) {
    PeerMem *pm = calloc(1, sizeof *pm);
    if (!pm) {
        snprintf(why, wn, "out of memory");
        return NULL;
    }
    pm->ops = ops, pm->ops_ctx = ops_ctx, pm->rank = rank, pm->nranks = n;
    pm->out = calloc((size_t)n, sizeof *pm->out);
    pm->peer = calloc((size_t)n, sizeof *pm->peer);
    pm->table = calloc((size_t)n * MN_PM_SLOTS, sizeof *pm->table);
    if (!pm->out || !pm->peer || !pm->table) snprintf(why, wn, "out of memory");
    else if (n > MN_DIRECT_MAX_RANKS)   /* not an error, so no WARN line */
        snprintf(why, wn, "%d ranks (direct collectives serve at most %d)", n, MN_DIRECT_MAX_RANKS);
    else if (ops->table_alloc(ops_ctx, (size_t)n * MN_PM_SLOTS * sizeof(MnPeerMem), &pm->table_dev) !=
             MSCCLRT_SUCCESS)
        snprintf(why, wn, "%s", mscclrt_last_error());
    return pm;
}

mscclrt_result pm_create(PeerMem **out, Boot *b, const PmOps *ops, void *ops_ctx) {
    *out = NULL;
    const int rank = boot_rank(b), n = boot_nranks(b);
    char why[300] = "";
    PeerMem *pm = pm_new(rank, n, ops, ops_ctx, why, sizeof why);
    if (pm) pm->boot = b;
    /* the channel is collective: every rank gets here and makes its own, even after a local
     * failure, so no rank waits for one that gave up */
    PmChan *chan = NULL;
    const mscclrt_result cr = pm_chan_fdpass(&chan, b);
    if (pm) pm->chan = chan;
    else if (chan) chan->destroy(chan);
    if (!why[0] && cr != MSCCLRT_SUCCESS) snprintf(why, sizeof why, "%s", mscclrt_last_error());
    /* all or none: a missing channel would leave the others announcing to nobody */
    int32_t *ok = calloc((size_t)n, sizeof *ok);
    if (!ok) {
        pm_destroy(pm);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    }
    ok[rank] = !why[0];
    mscclrt_result agree = boot_allgather(b, ok, sizeof *ok);
    int bad = -1;
    for (int q = 0; q < n && agree == MSCCLRT_SUCCESS; q++)
        if (!ok[q] && bad < 0) bad = q;
    free(ok);
    if (agree != MSCCLRT_SUCCESS) {
        pm_destroy(pm);
        return agree;
    }
    if (bad >= 0) {
        if (bad == rank) LOG_INFO(LOG_SUB_INIT, "rank %d: no peer memory (direct collectives off): %s", rank, why);
        else LOG_INFO(LOG_SUB_INIT, "rank %d: rank %d has no peer memory: direct collectives off", rank, bad);
        pm_destroy(pm);
        return MSCCLRT_SUCCESS;
    }
    *out = pm;
    return MSCCLRT_SUCCESS;
}

mscclrt_result pm_create_local(PeerMem **out, PmLocalGroup *g, int rank, int nranks,
                               const PmOps *ops, void *ops_ctx) {
    *out = NULL;
    char why[300] = "";
    PeerMem *pm = pm_new(rank, nranks, ops, ops_ctx, why, sizeof why);
    if (pm && !why[0] && pm_chan_local(&pm->chan, g, rank) != MSCCLRT_SUCCESS)
        snprintf(why, sizeof why, "%s", mscclrt_last_error());
    if (!pm || why[0]) {
        pm_destroy(pm);
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "rank %d: no peer memory: %s", rank,
                       why[0] ? why : "out of memory");
    }
    *out = pm;
    return MSCCLRT_SUCCESS;
}

/* ---- the outbox --------------------------------------------------------------------------- */
static bool outbox_push(PmOutbox *o, const PmMsgWire *m, int fd) {
    if (o->head > 0 && o->head == o->n) o->head = o->n = 0;   /* drained: start over */
    if (o->n == o->cap) {
        const int cap = o->cap ? 2 * o->cap : 8;
        PmMsgWire *v = realloc(o->v, (size_t)cap * sizeof *v);
        if (v) o->v = v;
        int *f = v ? realloc(o->fd, (size_t)cap * sizeof *f) : NULL;
        if (f) o->fd = f;
        if (!v || !f) return false;
        o->cap = cap;
    }
    /* a duplicate: the export's own fd may be closed (retired) before this is sent */
    const int dup_fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (fd >= 0 && dup_fd < 0) return false;
    o->fd[o->n] = dup_fd;
    o->v[o->n++] = *m;
    return true;
}

void pm_flush(PeerMem *pm) {
    for (int q = 0; q < pm->nranks; q++) {
        PmOutbox *o = &pm->out[q];
        while (o->head < o->n) {
            bool sent = false;
            if (pm->chan->post(pm->chan, q, &o->v[o->head], o->fd[o->head], &sent) !=
                MSCCLRT_SUCCESS) {
                /* the peer's socket is gone (it ended): nothing it could still map matters */
                LOG_WARN("rank %d: peer memory: %s", pm->rank, mscclrt_last_error());
                for (; o->head < o->n; o->head++)
                    if (o->fd[o->head] >= 0) close(o->fd[o->head]);
                break;
            }
            if (!sent) break;   /* its queue is full: the next call tries again */
            if (o->fd[o->head] >= 0) close(o->fd[o->head]);   /* the peer holds its own now */
            o->head++;
        }
    }
}

void pm_broadcast(PeerMem *pm, const PmMsgWire *m, int fd) {
    for (int q = 0; q < pm->nranks; q++)
        if (q != pm->rank && !outbox_push(&pm->out[q], m, fd)) {
            /* a peer that misses a message stops at the gap (it checks the numbers): it can
             * never map this rank's memory again, which is safe, and says so */
            LOG_WARN("rank %d: peer memory: out of memory or descriptors queueing message %u for "
                     "rank %d", pm->rank, m->pub, q);
        }
    pm_flush(pm);
}

/* ---- announcing and retiring -------------------------------------------------------------- */
static void retire(PeerMem *pm, int s) {
    PmShare *sh = &pm->share[s];
    PmMsgWire m = {.magic = PM_MAGIC, .version = PM_VERSION, .kind = PM_RETIRE,
                   .pub = ++pm->last_pub, .slot = (uint32_t)s};
    LOG_TRACE(LOG_SUB_XPORT, "rank %d: peer memory: retiring %#llx (%llu bytes, announcement %u) "
              "as message %u", pm->rank, (unsigned long long)sh->base, (unsigned long long)sh->size,
              sh->pub, m.pub);
    pm->ops->forget(pm->ops_ctx, sh->base);
    sh->live = false;
    pm_broadcast(pm, &m, -1);
}

static bool refused(const PeerMem *pm, uint64_t base, uint64_t id) {
    for (int i = 0; i < pm->nrefused && i < PM_REFUSED; i++)
        if (pm->refused[i].base == base && pm->refused[i].id == id) return true;
    return false;
}

void pm_locate(PeerMem *pm, const void *ptr, size_t bytes, uint32_t *pub, uint32_t *slot,
               uint64_t *off) {
    *pub = 0, *slot = 0, *off = 0;
    uint64_t base = 0, size = 0, id = 0;
    const uint64_t p = (uint64_t)(uintptr_t)ptr;
    if (pm->ops->resolve(pm->ops_ctx, p, &base, &size, &id) != MSCCLRT_SUCCESS) return;
    if (p < base || p - base > size || bytes > size - (p - base)) return;
    int hit = -1, free_slot = -1;
    for (int s = 0; s < MN_PM_SLOTS; s++) {
        PmShare *sh = &pm->share[s];
        if (!sh->live) {
            if (free_slot < 0) free_slot = s;
            continue;
        }
        if (sh->base == base && sh->size == size && sh->id == id) {
            hit = s;
            break;
        }
        /* the address range of a shared allocation now holds another one: the old one was
         * freed, so peers may unmap it */
        if (sh->base < base + size && base < sh->base + sh->size) {
            retire(pm, s);
            if (free_slot < 0) free_slot = s;
        }
    }
    if (hit < 0) {
        if (refused(pm, base, id)) return;
        if (free_slot < 0) {
            if (!pm->warned_full)
                LOG_INFO(LOG_SUB_XPORT, "rank %d: peer memory: %d allocations shared already; "
                         "%#llx stays unshared (its calls take the slot path)", pm->rank,
                         MN_PM_SLOTS, (unsigned long long)base);
            pm->warned_full = true;
            return;
        }
        PmMsgWire m = {.magic = PM_MAGIC, .version = PM_VERSION, .kind = PM_ANNOUNCE,
                       .slot = (uint32_t)free_slot};
        int fd = -1;
        if (pm->ops->describe(pm->ops_ctx, base, size, &m.desc, &fd) != MSCCLRT_SUCCESS) {
            LOG_INFO(LOG_SUB_XPORT, "rank %d: peer memory: allocation %#llx (%llu bytes) is not "
                     "shared (its calls take the slot path): %s", pm->rank,
                     (unsigned long long)base, (unsigned long long)size, mscclrt_last_error());
            pm->refused[pm->nrefused++ % PM_REFUSED] = (PmRefused){base, id};
            return;
        }
        m.pub = ++pm->last_pub;
        pm->share[free_slot] = (PmShare){.base = base, .size = size, .id = id, .pub = m.pub, .live = true};
        LOG_TRACE(LOG_SUB_XPORT, "rank %d: peer memory: announcing %#llx (%llu bytes) in slot %d "
                  "as message %u", pm->rank, (unsigned long long)base, (unsigned long long)size,
                  free_slot, m.pub);
        pm_broadcast(pm, &m, fd);
        hit = free_slot;
    }
    *pub = pm->share[hit].pub;
    *slot = (uint32_t)hit;
    *off = p - base;
}

int pm_live_shares(const PeerMem *pm) {
    int k = 0;
    for (int s = 0; s < MN_PM_SLOTS; s++) k += pm->share[s].live;
    return k;
}
