/*
 * comm_fault.c - what a communicator does when something went wrong: its health as NCCL's
 * ncclCommGetAsyncError reports it (a revoked or aborted comm, a failed port proxy, a peer
 * process on this host that is gone), revocation (running kernels stop, new calls fail) and
 * abort (kernels stop, the device is waited for with a deadline, and the comm is released
 * without talking to peers, which may be dead).
 *
 * Kernels stop through the comm's abort word: every spin loop of the device library gives up
 * once it is set (kernels/mk_types.cuh), so a collective waiting for a dead peer ends.
 */
#include "comm/comm.h"
#include "bootstrap/bootstrap.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ABORT_WAIT_MS 10000

/* Running kernels give up; new calls fail (the hot path checks revoked too). Safe from another
 * thread while calls run on the comm: only atomic stores. */
static void stop_kernels(mscclrt_comm *c) {
    if (c->abort_host) __atomic_store_n(c->abort_host, 1u, __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->revoked, true, __ATOMIC_SEQ_CST);
}

mscclrt_result mscclrt_comm_get_async_error(mscclrt_comm *c) {
    if (!c) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_get_async_error: comm is NULL");
    if (c->magic != EXEC_COMM_MAGIC)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_comm_get_async_error: comm %p is not a "
                       "live communicator", (void *)c);
    if (__atomic_load_n(&c->revoked, __ATOMIC_RELAXED) && !c->aborted)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: the communicator was revoked", c->rank);
    if (c->proxy && proxy_check(c->proxy) != MSCCLRT_SUCCESS) return MSCCLRT_ERR_REMOTE;
    if (!c->boot) return MSCCLRT_SUCCESS;
    /* peers on this host: their processes must still exist (kill 0 probes without a signal) */
    const int me = boot_node(c->boot);
    const int mypid = (int)getpid();
    for (int q = 0; q < c->nranks; q++) {
        if (q == c->rank || boot_node_of(c->boot, q) != me) continue;
        const int pid = boot_pid_of(c->boot, q);
        if (pid <= 0 || pid == mypid) continue;
        if (kill(pid, 0) != 0 && errno == ESRCH)
            return rt_fail(MSCCLRT_ERR_REMOTE, "rank %d: peer rank %d (process %d on this host) is "
                           "gone: collectives that wait for it will not finish; abort the "
                           "communicator", c->rank, q, pid);
    }
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_comm_revoke(mscclrt_comm *c) {
    TRY(exec_comm_check(c, "mscclrt_comm_revoke"));
    stop_kernels(c);
    LOG_INFO(LOG_SUB_INIT, "rank %d: communicator revoked: running kernels stop, new calls fail",
             c->rank);
    return MSCCLRT_SUCCESS;
}

typedef struct {
    CuContext ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int refs;                      /* the waiter and the caller; the last one frees */
} SyncJob;

static void job_drop(SyncJob *j) {
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void *sync_thread(void *arg) {
    SyncJob *j = arg;
    cu_capture_relaxed();
    cu.cuCtxSetCurrent(j->ctx);
    cu.cuCtxSynchronize();
    pthread_mutex_lock(&j->mu);
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_drop(j);
    return NULL;
}

/* Waits for the comm's device with a deadline (a kernel that ignores the abort word, e.g. a
 * native one that never looks at it, must not hang the abort). */
static bool device_idle(mscclrt_comm *c, int ms) {
    SyncJob *j = calloc(1, sizeof *j);
    if (!j) return false;
    j->ctx = c->ctx;
    j->refs = 2;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, sync_thread, j) != 0) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
        return false;
    }
    pthread_detach(th);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) { dl.tv_sec++; dl.tv_nsec -= 1000000000; }
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    while (!j->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&j->cv, &j->mu, &dl);
    const bool done = j->done;
    pthread_mutex_unlock(&j->mu);
    job_drop(j);
    return done;
}

mscclrt_result mscclrt_comm_abort(mscclrt_comm *c) {
    if (!c) return MSCCLRT_SUCCESS;
    TRY(exec_comm_check(c, "mscclrt_comm_abort"));
    const double t0 = rt_now_s();
    stop_kernels(c);
    c->aborted = true;
    if (!device_idle(c, ABORT_WAIT_MS)) {
        /* kernels still run: their memory must stay; the host side goes, the comm is dead */
        c->magic = 0;
        if (c->boot) boot_close(c->boot);
        c->boot = NULL;
        return rt_fail(MSCCLRT_ERR_TIMEOUT, "rank %d: abort: the device did not finish its work "
                       "within %d ms; the communicator's device memory is left allocated",
                       c->rank, ABORT_WAIT_MS);
    }
    mscclrt_result res = mscclrt_comm_destroy(c);
    LOG_INFO(LOG_SUB_INIT, "communicator aborted in %.1f ms", (rt_now_s() - t0) * 1e3);
    return res;
}
