/*
 * cu_wait.c - waiting for the device from the library's own threads (the network transport's
 * and the port proxy's) without holding a core. In a context created with CUDA's default
 * scheduling (CU_CTX_SCHED_AUTO) and fewer contexts than the machine has cores, which is every
 * training job's case, cuEventSynchronize and cuStreamSynchronize spin without yielding; mpirun
 * binds each rank to one core by default, so that spin keeps the core from the transport's other
 * threads of the rank (a receive thread woken by data waits for the scheduler's tick, as the
 * proxy's own busy poll once made every message wait: BENCHMARKS.md). These poll the event or
 * stream and yield the core between polls; alone on a core they cost what the spin costs.
 */
#include "cuda/cuda_driver.h"

#include <sched.h>

CuResult cu_event_wait(CuEvent e) {
    for (;;) {
        const CuResult r = cu.cuEventQuery(e);
        if (r != CU_ERR_NOT_READY) return r;
        sched_yield();
    }
}

CuResult cu_stream_wait(CuStream s) {
    for (;;) {
        const CuResult r = cu.cuStreamQuery(s);
        if (r != CU_ERR_NOT_READY) return r;
        sched_yield();
    }
}
