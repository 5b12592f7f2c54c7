/*
 * run_plan.c - a small application of the public API: loads a plan, runs one float32 sum on the
 * CPU reference backend with every rank's input set to rank+1, and prints the first output
 * elements. Build against an installed tree: cc run_plan.c $(pkg-config --cflags --libs mscclrt)
 * Usage: run_plan PLAN.json [BYTES]   (allreduce plans; BYTES defaults to the smallest legal size)
 */
#include <mscclrt.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: run_plan PLAN.json [BYTES]\n");
        return 2;
    }
    mscclrt_plan *plan = NULL;
    mscclrt_plan_info info;
    size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 0, in = 0, out = 0;
    if (mscclrt_plan_load(&plan, argv[1]) != MSCCLRT_SUCCESS ||
        mscclrt_plan_get_info(plan, &info) != MSCCLRT_SUCCESS ||
        (!bytes && mscclrt_plan_min_bytes(plan, &bytes) != MSCCLRT_SUCCESS) ||
        mscclrt_plan_call_sizes(plan, bytes, &in, &out) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "run_plan: %s\n", mscclrt_last_error());
        mscclrt_plan_free(plan);
        return 1;
    }
    int n = info.nranks, rc = 1;
    float **send = calloc((size_t)n, sizeof *send), **recv = calloc((size_t)n, sizeof *recv);
    mscclrt_cpu_comm *comm = NULL;
    for (int r = 0; send && recv && r < n; r++) {
        send[r] = malloc(in);
        recv[r] = malloc(out);
        if (!send[r] || !recv[r]) goto out;
        for (size_t i = 0; i < in / sizeof(float); i++) send[r][i] = (float)(r + 1);
    }
    if (!send || !recv || mscclrt_cpu_comm_create(&comm, n) != MSCCLRT_SUCCESS ||
        mscclrt_cpu_execute(comm, plan, (void *const *)send, (void *const *)recv, in, out,
                            MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "run_plan: %s\n", mscclrt_last_error());
        goto out;
    }
    printf("%s (%s, %d ranks, %zu bytes): rank 0 output[0] = %g (expected %g)\n", info.name,
           info.collective, n, bytes, recv[0][0], n * (n + 1) / 2.0);
    rc = recv[0][0] == n * (n + 1) / 2.0f ? 0 : 1;
out:
    mscclrt_cpu_comm_destroy(comm);
    for (int r = 0; r < n; r++) {
        if (send) free(send[r]);
        if (recv) free(recv[r]);
    }
    free(send);
    free(recv);
    mscclrt_plan_free(plan);
    return rc;
}
