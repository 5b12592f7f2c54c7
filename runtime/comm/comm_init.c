/*
 * comm_init.c - making and destroying communicators, the top of the runtime's layers
 * (comm -> algo -> exec): mscclrt_comm_init_all (one process, a device per rank, one group),
 * mscclrt_get_unique_id / mscclrt_comm_init_rank / mscclrt_comm_init_env (a rank per process
 * or thread, over the TCP bootstrap), mscclrt_comm_destroy, and the accessors. Each step of
 * the executor (runtime/exec/exec_comm.c) and of the algorithm layer (the native algorithms'
 * context, made collectively with the comm; the layer's state, freed between the executor's
 * contexts and its transports) is called from here, so no lower room calls up.
 */
#include "comm/comm.h"
#include "algo/algo.h"
#include "algo/algo_native.h"
#include "bootstrap/bootstrap.h"
#include "core/err.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(mscclrt_unique_id) == sizeof(BootId), "unique id carries a BootId");

void comm_release(mscclrt_comm *c) {
    CuContext prev;
    exec_comm_quiesce(c, &prev);
    algo_native_report(c);   /* while the native scratch, which holds its counts, is there */
    exec_comm_drop_state(c);
    algo_comm_free(c);   /* after the contexts (the native one's plan lives there), with the
                            device context current, peers idle and the bootstrap open */
    exec_comm_close(c, prev);
}

/* ---- one process, every rank ------------------------------------------------------------------ */
mscclrt_result mscclrt_comm_init_all(mscclrt_comm **comms, int ndev, const int *devlist) {
    if (!comms) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_all: comms is NULL");
    if (ndev < 1 || ndev > 1024)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_all: ndev %d out of range "
                       "[1, 1024]", ndev);
    for (int i = 0; i < ndev; i++) comms[i] = NULL;
    TRY(cu_load());
    int count = 0;
    TRY(cu_check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount"));
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= count)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_all: devlist[%d] = %d out "
                           "of range [0, %d)", i, d, count);
    }
    ExecClique *q = exec_clique_new(ndev);
    if (!q) return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_comm_init_all: out of memory");
    mscclrt_result res = MSCCLRT_SUCCESS;
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    for (int i = 0; i < ndev; i++) {
        mscclrt_comm *c = exec_comm_new(i, ndev, devlist ? devlist[i] : i);
        if (!c) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_comm_init_all: out of memory");
            goto fail;
        }
        exec_clique_add(q, c);
        TRY_GOTO(exec_comm_attach(c), res, fail);
    }
    TRY_GOTO(exec_clique_peer_access(q, "mscclrt_comm_init_all"), res, fail);
    cu.cuCtxSetCurrent(prev);
    for (int i = 0; i < ndev; i++) comms[i] = exec_clique_comm(q, i);
    /* the native algorithms' context of every rank: one setup round for the whole group */
    res = algo_native_init(comms, ndev);
    if (res != MSCCLRT_SUCCESS) {
        for (int i = 0; i < ndev; i++) comms[i] = NULL;
        goto fail;
    }
    LOG_INFO(LOG_SUB_INIT, "single-process group of %d ranks (sm_%d)", ndev, comms[0]->arch);
    return MSCCLRT_SUCCESS;
fail:
    cu.cuCtxSetCurrent(prev);
    /* no comm has reached the caller, so nothing else holds q: release every comm made so far,
     * then free q once, here, whatever its live count says (0 when comm 0's calloc failed) */
    for (int i = 0; i < ndev; i++) {
        mscclrt_comm *c = exec_clique_comm(q, i);
        if (!c) continue;
        exec_clique_leave(c);
        comm_release(c);
    }
    exec_clique_free(q);
    return res;
}

/* ---- a rank per process or thread ------------------------------------------------------------ */
mscclrt_result mscclrt_get_unique_id(mscclrt_unique_id *id) {
    if (!id) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_get_unique_id: id is NULL");
    BootId b;
    TRY(boot_get_unique_id(&b));
    memcpy(id, &b, sizeof b);
    return MSCCLRT_SUCCESS;
}

/* Opens the driver and checks *device against the device count; -1 becomes `local` modulo it. */
static mscclrt_result pick_device(const char *fn, int local, int *device) {
    TRY(cu_load());
    int count = 0;
    TRY(cu_check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount"));
    if (*device < 0) *device = local % (count ? count : 1);
    if (*device >= count)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: device %d out of range [0, %d)", fn, *device,
                       count);
    return MSCCLRT_SUCCESS;
}

/* The comm of a rank whose bootstrap is up (boot is taken over: closed on failure, without a
 * barrier, so that the peers see the rank leave at once). */
static mscclrt_result boot_comm_create(mscclrt_comm **out, Boot *boot, int device, const char *fn) {
    mscclrt_comm *c = exec_comm_new(boot_rank(boot), boot_nranks(boot), device);
    if (!c) {
        boot_close(boot);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    }
    mscclrt_result res;
    CuContext prev = NULL;
    cu.cuCtxGetCurrent(&prev);
    TRY_GOTO(exec_comm_attach(c), res, fail);
    TRY_GOTO(exec_comm_connect(c, boot, fn), res, fail);
    cu.cuCtxSetCurrent(prev);
    /* the native algorithms' context: collective, like the rest of the creation */
    TRY_GOTO(algo_native_init(&c, 1), res, fail);
    LOG_INFO(LOG_SUB_INIT, "rank %d of %d on device %d (sm_%d), bootstrap ready", c->rank,
             c->nranks, device, c->arch);
    *out = c;
    return MSCCLRT_SUCCESS;
fail:
    cu.cuCtxSetCurrent(prev);
    c->boot = NULL;
    comm_release(c);
    boot_close(boot);
    return res;
}

mscclrt_result mscclrt_comm_init_rank(mscclrt_comm **out, int nranks, mscclrt_unique_id id,
                                      int rank, int device) {
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_rank: comm is NULL");
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_rank: rank %d out of range "
                       "[0, %d)", rank, nranks);
    TRY(pick_device("mscclrt_comm_init_rank", rank, &device));
    BootId bid;
    memcpy(&bid, &id, sizeof bid);
    Boot *boot = NULL;
    TRY(boot_init(&boot, &bid, rank, nranks, 0));
    return boot_comm_create(out, boot, device, "mscclrt_comm_init_rank");
}

mscclrt_result mscclrt_comm_init_env(mscclrt_comm **out, int device) {
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_env: comm is NULL");
    *out = NULL;
    if (device < -1)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_init_env: device %d (expected -1 "
                       "or a device number)", device);
    /* the driver first: a rank that cannot use a GPU fails before the others wait for it */
    int probe = device;
    TRY(pick_device("mscclrt_comm_init_env", 0, &probe));
    Boot *boot = NULL;
    TRY(boot_init_env(&boot));
    if (device < 0) {
        mscclrt_result res = pick_device("mscclrt_comm_init_env", boot_local_rank(boot), &device);
        if (res != MSCCLRT_SUCCESS) {
            boot_close(boot);
            return res;
        }
    }
    return boot_comm_create(out, boot, device, "mscclrt_comm_init_env");
}

/* ---- the end, and what a comm says about itself ---------------------------------------------- */
mscclrt_result mscclrt_comm_destroy(mscclrt_comm *c) {
    if (!c) return MSCCLRT_SUCCESS;
    TRY(exec_comm_check(c, "mscclrt_comm_destroy"));
    ExecClique *q = c->clique;
    const bool last = q && exec_clique_leave(c);
    comm_release(c);
    if (last) exec_clique_free(q);
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_comm_rank(const mscclrt_comm *c, int *rank) {
    TRY(exec_comm_check(c, "mscclrt_comm_rank"));
    if (!rank) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_rank: rank is NULL");
    *rank = c->rank;
    return MSCCLRT_SUCCESS;
}
mscclrt_result mscclrt_comm_size(const mscclrt_comm *c, int *size) {
    TRY(exec_comm_check(c, "mscclrt_comm_size"));
    if (!size) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_size: size is NULL");
    *size = c->nranks;
    return MSCCLRT_SUCCESS;
}
mscclrt_result mscclrt_comm_device(const mscclrt_comm *c, int *device) {
    TRY(exec_comm_check(c, "mscclrt_comm_device"));
    if (!device) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_device: device is NULL");
    *device = c->device;
    return MSCCLRT_SUCCESS;
}
