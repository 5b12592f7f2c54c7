/*
 * exec_share.c - what ranks sharing one GPU inside one process need, checked before a kernel
 * that would wait forever is launched (mscclrt_comm_init_all with a device listed more than
 * once; tests and mscclrt-run --gpus do this). Spinning collectives make progress only if every
 * rank's kernel runs at the same time:
 *   - their thread blocks must all be resident at once: ranks on the device x blocks of each
 *     launch <= what the device holds of that kernel (occupancy x multiprocessors);
 *   - their streams must not share a hardware queue: CUDA gives a context
 *     CUDA_DEVICE_MAX_CONNECTIONS queues (default 8) and maps further streams onto them, so a
 *     port proxy's copy can sit behind another rank's kernel that waits for it. That is what hung
 *     8 ranks of a port-channel plan on one GPU (a rank's stream and its proxy's stream each, 16
 *     streams on 8 queues), while 4 ranks (8 streams) and one process per rank (own contexts) ran.
 *   - a kernel's first load (cuModuleLoadData) waits for the kernels running in its context,
 *     so a rank that loads while another rank of the process already spins in a collective
 *     waits forever: ranks that share a context finish their loads together before any of them
 *     launches (a group's calls are all prepared before any launch already).
 * One process per rank has none of these limits: separate contexts are time-sliced.
 */
#include "exec/exec_internal.h"
#include "bootstrap/bootstrap.h"
#include "core/err.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include "core/param.h"

/* comms of c's single-process group on c's device (c included); 1 for bootstrap comms */
static int ranks_on_device(const mscclrt_comm *c) {
    const ExecClique *q = c->clique;
    if (!q) return 1;
    int k = 0;
    for (int i = 0; i < q->nranks; i++)
        if (q->comms[i] && q->comms[i]->device == c->device) k++;
    return k;
}

static int int_cmp(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

int exec_context_share_max(mscclrt_comm *c) {
    if (c->context_share_max > 0) return c->context_share_max;
    const ExecClique *q = c->clique;
    int most = 1;
    int *devs = q ? malloc((size_t)q->nranks * sizeof *devs) : NULL;
    if (devs) {   /* every comm of the clique is in this process: count each device's */
        int k = 0, sm_min = 0;
        for (int i = 0; i < q->nranks; i++) {
            if (!q->comms[i]) continue;
            devs[k++] = q->comms[i]->device;
            int sms = 0;
            if (cu.cuDeviceGetAttribute(&sms, CU_ATTR_SM_COUNT, q->comms[i]->dev) == CU_OK &&
                sms > 0 && (sm_min == 0 || sms < sm_min))
                sm_min = sms;
        }
        c->sm_min = sm_min;
        qsort(devs, (size_t)k, sizeof *devs, int_cmp);
        for (int i = 1, run = 1; i < k; i++) {
            run = devs[i] == devs[i - 1] ? run + 1 : 1;
            if (run > most) most = run;
        }
        free(devs);
    } else if (q) {
        return q->nranks;   /* out of memory: assume the worst, and do not remember it */
    }
    c->context_share_max = most;
    return most;
}

int exec_native_block_cap(mscclrt_comm *c, int limit) {
    const int share = exec_context_share_max(c);
    /* ranks sharing a GPU share its multiprocessors: every native kernel runs 1024-thread
     * blocks, one per multiprocessor, and all ranks' blocks must be resident at once (a GPU of
     * unknown size counts as 128, below every Hopper's 132). 4 ranks keep the slot path's 32
     * blocks on 132 SMs, but not the direct path's 64 (4 x 64 = 256: refused as a hang) */
    const int sms = c->sm_min > 0 ? c->sm_min : 128;
    const int cap = share > 1 ? sms / share : limit;
    return cap < 1 ? 1 : cap < limit ? cap : limit;
}

/* CUDA_DEVICE_MAX_CONNECTIONS as the driver reads it (1..32, default 8) */
static int hw_queues(void) {
    const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    char *end = NULL;
    long n = v && *v ? strtol(v, &end, 10) : 8;
    if (!v || !*v || *end || n < 1) return 8;
    return n > 32 ? 32 : (int)n;
}

mscclrt_result exec_share_check_blocks(const mscclrt_comm *c, CuFunction fn, int blocks,
                                       int threads, const char *what) {
    const int k = ranks_on_device(c);
    if (k < 2) return MSCCLRT_SUCCESS;
    int per_sm = 0, sms = 0;
    if (cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, 0) != CU_OK ||
        cu.cuDeviceGetAttribute(&sms, CU_ATTR_SM_COUNT, c->dev) != CU_OK)
        return MSCCLRT_SUCCESS;   /* no answer: nothing to refuse on */
    const long long need = (long long)k * blocks, room = (long long)per_sm * sms;
    if (need <= room) return MSCCLRT_SUCCESS;
    return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: %s: %d ranks of this process share device "
                   "%d and each launches %d blocks of %d threads; they wait for each other, so "
                   "all %lld blocks must be resident at once, but the device holds %lld of this "
                   "kernel (%d per multiprocessor x %d): this would hang. Use fewer ranks per "
                   "GPU, fewer thread blocks, or one process per rank", c->rank, what, k,
                   c->device, blocks, threads, need, room, per_sm, sms);
}

mscclrt_result exec_share_check_proxy(const mscclrt_comm *c, const char *what) {
    const int k = ranks_on_device(c), queues = hw_queues();
    if (k < 2 || 2 * k <= queues) return MSCCLRT_SUCCESS;
    return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: %s: %d ranks of this process share device "
                   "%d and each needs its own stream and its port proxy's stream (%d streams), "
                   "but the device gives a process %d hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): "
                   "a proxy's copy would queue behind a kernel that waits for it and hang. Set "
                   "CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts, use one process per rank, "
                   "or MSCCLRT_PORT_PROXY=0", c->rank, what, k, c->device, 2 * k, queues);
}

/* The clique's barrier of the comms on one device (threads driving one comm each). */
static mscclrt_result clique_load_barrier(mscclrt_comm *c, int k) {
    ExecClique *q = c->clique;
    pthread_mutex_lock(&q->mu);
    const uint64_t gen = q->load_gen;
    if (++q->load_arrived == k) {
        q->load_arrived = 0;
        q->load_gen++;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        return MSCCLRT_SUCCESS;
    }
    long long ms;
    mscclrt_result res = param_int(PARAM_SETUP_TIMEOUT_MS, &ms);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    int rc = 0;
    while (res == MSCCLRT_SUCCESS && q->load_gen == gen && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&q->cv, &q->mu, &dl);
    if (res == MSCCLRT_SUCCESS && q->load_gen == gen) {
        q->load_arrived--;
        res = rt_fail(MSCCLRT_ERR_TIMEOUT, "rank %d: the ranks sharing device %d did not all load "
                      "their kernel within %lld ms (MSCCLRT_SETUP_TIMEOUT_MS)", c->rank, c->device,
                      ms);
    }
    pthread_mutex_unlock(&q->mu);
    return res;
}

mscclrt_result exec_share_after_load(mscclrt_comm *c) {
    /* ranks of a bootstrap group each have their own thread (and group) */
    if (c->boot) return c->group_shares_context ? boot_barrier(c->boot) : MSCCLRT_SUCCESS;
    /* a single-process group in a group call: one thread prepares every rank before launching */
    if (exec_in_group()) return MSCCLRT_SUCCESS;
    const int k = ranks_on_device(c);
    return k > 1 ? clique_load_barrier(c, k) : MSCCLRT_SUCCESS;
}
