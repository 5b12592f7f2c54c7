/*
 * exec_pdl.c - programmatic dependent launch (PDL) of libmscclrt's own kernels
 * (MSCCLRT_LAUNCH_PDL). On sm_90 and later a kernel launched with programmatic stream
 * serialization may be scheduled while the previous kernel on its stream still runs, once that
 * kernel allows it (griddepcontrol.launch_dependents); it then waits in its first statement
 * (mk::launch_prologue: griddepcontrol.wait) until that kernel has completed and its memory is
 * visible. Back-to-back collectives (a CUDA graph of them, nccl-tests -G 1, a training step's
 * buckets) so overlap each launch with the previous kernel's run instead of paying it after.
 *
 * Only kernels whose source begins with the prologue get the attribute: generated plan kernels
 * and the built-in native ones, never a user's native kernel (algo_registry), which may touch
 * memory before any wait. And not where another rank of the group uses the same GPU: a
 * kernel scheduled early holds its blocks while it waits, and ranks sharing a GPU need every
 * rank's kernel resident at once (their kernels wait for each other), so an early one could
 * keep a peer's kernel out (the one-GPU test setups: mscclrt-run --gpus 1, NCCL_TESTS_DEVICE=0).
 * A driver without cuLaunchKernelEx, a GPU before sm_90 or a launch the driver refuses with
 * the attribute leaves the communicator on plain launches.
 */
#include "exec/exec_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <string.h>

bool exec_pdl_wanted(long long param, int cc_major, bool have_launch_ex, bool gpu_shared) {
    return param != 0 && cc_major >= 9 && have_launch_ex && !gpu_shared;
}

/* whether another rank of c's group runs on c's GPU: ranks of one process (a clique) from the
 * clique's devices, ranks joined through the bootstrap from what they published (exec_mp.c) */
static bool gpu_shared(mscclrt_comm *c) {
    if (c->clique) return exec_context_share_max(c) > 1;
    return c->gpu_shared;
}

mscclrt_result exec_pdl_decide(mscclrt_comm *c) {
    long long want = 1;
    TRY(param_int(PARAM_LAUNCH_PDL, &want));   /* a bad value fails the call, naming it */
    const bool shared = gpu_shared(c);
    /* c->arch: the compute capability read when the comm attached its device (e.g. 90) */
    c->pdl = exec_pdl_wanted(want, c->arch / 10, cu.cuLaunchKernelEx != NULL, shared) ? 1 : -1;
    LOG_INFO(LOG_SUB_EXEC, "rank %d: programmatic dependent launch %s (MSCCLRT_LAUNCH_PDL=%lld, "
             "sm_%d%s%s)", c->rank, c->pdl > 0 ? "on" : "off", want, c->arch,
             cu.cuLaunchKernelEx ? "" : ", no cuLaunchKernelEx",
             shared ? ", another rank uses this GPU" : "");
    return MSCCLRT_SUCCESS;
}

CuResult exec_pdl_launch(mscclrt_comm *c, CuFunction fn, int blocks, int threads, void **params,
                         void *stream) {
    CuLaunchAttr attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION;
    attr.value.programmatic_serialization = 1;
    const CuLaunchConfig cfg = {
        .grid_x = (unsigned)blocks, .grid_y = 1, .grid_z = 1,
        .block_x = (unsigned)threads, .block_y = 1, .block_z = 1,
        .smem = 0, .stream = (CuStream)stream, .attrs = &attr, .nattrs = 1,
    };
    CuResult r = cu.cuLaunchKernelEx(&cfg, fn, params, NULL);
    if (r == CU_OK) return r;
    /* refused with the attribute: plain launches from now on (if the plain one fails too, its
     * error is the caller's) */
    c->pdl = -1;
    const char *why = "?";
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &why);
    LOG_INFO(LOG_SUB_EXEC, "rank %d: a launch with programmatic serialization failed (%s): "
             "plain launches from now on", c->rank, why);
    return cu.cuLaunchKernel(fn, (unsigned)blocks, 1, 1, (unsigned)threads, 1, 1, 0,
                             (CuStream)stream, params, NULL);
}
