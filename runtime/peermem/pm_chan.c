/*
 * pm_chan.c - how peer memory's messages travel: between processes, the datagram channel of
 * fdpass (fdpass_post / fdpass_take, an fd alongside); between the ranks of one process (a
 * group made by mscclrt_comm_init_all), a queue per rank in memory, under one mutex. Both keep
 * each sender's messages in order and never make a sender wait.
 */
#include "peermem/pm_internal.h"
#include "core/err.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- between processes ---------------------------------------------------------------------- */
typedef struct FdChan {
    PmChan base;
    FdPass *f;
} FdChan;

static mscclrt_result fd_post(PmChan *ch, int peer, const PmMsgWire *m, int fd, bool *sent) {
    return fdpass_post(((FdChan *)ch)->f, peer, PM_KEY, m, sizeof *m, fd, sent);
}

static mscclrt_result fd_take(PmChan *ch, PmChanMsg *out, bool *got) {
    FdPassMsg msg;
    TRY(fdpass_take(((FdChan *)ch)->f, &msg, got));
    if (!*got) return MSCCLRT_SUCCESS;
    out->src = msg.src;
    out->fd = msg.fd;
    out->ok = msg.key == PM_KEY && msg.len == sizeof out->m;
    if (out->ok) memcpy(&out->m, msg.msg, sizeof out->m);
    return MSCCLRT_SUCCESS;
}

static void fd_destroy(PmChan *ch) {
    if (!ch) return;
    fdpass_destroy(((FdChan *)ch)->f);
    free(ch);
}

mscclrt_result pm_chan_fdpass(PmChan **out, Boot *b) {
    *out = NULL;
    FdChan *c = calloc(1, sizeof *c);
    FdPass *f = NULL;
    /* collective: made even when calloc failed, so no rank waits for this one */
    const mscclrt_result r = fdpass_create(&f, b);
    if (!c || r != MSCCLRT_SUCCESS) {
        fdpass_destroy(f);
        free(c);
        return r != MSCCLRT_SUCCESS ? r : rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    }
    c->base = (PmChan){.post = fd_post, .take = fd_take, .destroy = fd_destroy};
    c->f = f;
    *out = &c->base;
    return MSCCLRT_SUCCESS;
}

/* ---- inside one process ---------------------------------------------------------------------- */
typedef struct LocalMsg {
    struct LocalMsg *next;
    int src;
    PmMsgWire m;
} LocalMsg;

struct PmLocalGroup {
    pthread_mutex_t mu;
    int n, refs;
    LocalMsg **head, **tail;     /* [n]: each rank's inbox, oldest first */
};

typedef struct LocalChan {
    PmChan base;
    PmLocalGroup *g;
    int rank;
} LocalChan;

PmLocalGroup *pm_local_group_new(int n) {
    PmLocalGroup *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->head = calloc((size_t)n, sizeof *g->head);
    g->tail = calloc((size_t)n, sizeof *g->tail);
    if (!g->head || !g->tail) {
        free(g->head);
        free(g->tail);
        free(g);
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    g->n = n;
    g->refs = 1;
    return g;
}

void pm_local_group_drop(PmLocalGroup *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    const int left = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (left) return;
    for (int r = 0; r < g->n; r++)
        while (g->head[r]) {
            LocalMsg *m = g->head[r];
            g->head[r] = m->next;
            free(m);
        }
    pthread_mutex_destroy(&g->mu);
    free(g->head);
    free(g->tail);
    free(g);
}

static mscclrt_result local_post(PmChan *ch, int peer, const PmMsgWire *m, int fd, bool *sent) {
    LocalChan *c = (LocalChan *)ch;
    *sent = false;
    if (fd >= 0)   /* a process does not pass itself descriptors: its peers use the pointer */
        return rt_fail(MSCCLRT_ERR_INTERNAL, "peer memory: a descriptor for a rank of this process");
    if (peer < 0 || peer >= c->g->n)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "peer memory: peer %d out of range [0, %d)", peer,
                       c->g->n);
    LocalMsg *e = malloc(sizeof *e);
    if (!e) return MSCCLRT_SUCCESS;   /* not sent: the outbox keeps it for the next try */
    e->next = NULL;
    e->src = c->rank;
    e->m = *m;
    pthread_mutex_lock(&c->g->mu);
    if (c->g->tail[peer]) c->g->tail[peer]->next = e;
    else c->g->head[peer] = e;
    c->g->tail[peer] = e;
    pthread_mutex_unlock(&c->g->mu);
    *sent = true;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result local_take(PmChan *ch, PmChanMsg *out, bool *got) {
    LocalChan *c = (LocalChan *)ch;
    pthread_mutex_lock(&c->g->mu);
    LocalMsg *e = c->g->head[c->rank];
    if (e) {
        c->g->head[c->rank] = e->next;
        if (!e->next) c->g->tail[c->rank] = NULL;
    }
    pthread_mutex_unlock(&c->g->mu);
    *got = e != NULL;
    if (e) {
        *out = (PmChanMsg){.src = e->src, .fd = -1, .ok = true, .m = e->m};
        free(e);
    }
    return MSCCLRT_SUCCESS;
}

static void local_destroy(PmChan *ch) {
    if (!ch) return;
    pm_local_group_drop(((LocalChan *)ch)->g);
    free(ch);
}

mscclrt_result pm_chan_local(PmChan **out, PmLocalGroup *g, int rank) {
    *out = NULL;
    LocalChan *c = calloc(1, sizeof *c);
    if (!c) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    c->base = (PmChan){.post = local_post, .take = local_take, .destroy = local_destroy};
    c->g = g;
    c->rank = rank;
    pthread_mutex_lock(&g->mu);
    g->refs++;
    pthread_mutex_unlock(&g->mu);
    *out = &c->base;
    return MSCCLRT_SUCCESS;
}
