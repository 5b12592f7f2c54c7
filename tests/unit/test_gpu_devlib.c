/*
 * test_gpu_devlib.c - the device library's data movement on one GPU, without plans or peers:
 * reduce_packets with 1 to 9 packet sources (the 4-peer overlapped waits, packets that arrive
 * while the kernel already waits), copy_multi and to_packets with 1 to 7 destinations (the
 * fan-out of fused puts), over aligned and unaligned pointers and sizes with tails. Kernels are
 * written here, compiled with NVRTC through cg_compile and checked against host arithmetic.
 * Runs where a GPU is (make test-gpu); skips (77) elsewhere.
 */
#include "../harness.h"

#include "codegen/codegen.h"
#include "core/err.h"
#include "cuda/cuda_driver.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXK 9          /* packet sources of one reduce_packets (an op has at most 10 entries) */
#define MAXD 7          /* destinations of one fan-out */

static CuContext ctx;
static CuModule mod;
static CuStream stream, side;

/* One kernel per source/destination count, each a single 256-thread block. */
static char *kernel_source(void) {
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    n += (size_t)snprintf(s + n, cap - n, "#include \"mscclrt_device.cuh\"\n");
    for (int k = 1; k <= MAXK; k++)
        for (int p = 8; p <= 16; p += 8) {
            n += (size_t)snprintf(s + n, cap - n,
                "extern \"C\" __global__ void rp%d_%d(char *out, const char *local, const char *pk,"
                " unsigned long long stride, unsigned long long bytes, unsigned flag) {\n"
                "  char *const DP[1] = {out};\n  char *const DK[1] = {0};\n"
                "  const char *const PK[%d] = {", k, p, k);
            for (int i = 0; i < k; i++)
                n += (size_t)snprintf(s + n, cap - n, "%spk + %d * stride", i ? ", " : "", i);
            n += (size_t)snprintf(s + n, cap - n, "};\n"
                "  mk::reduce_packets<float, 0, %d, %d, 1, 0>(DP, DK, local, PK, bytes, flag);\n}\n",
                p, k);
        }
    for (int d = 1; d <= MAXD; d++) {
        char list[512];
        size_t m = 0;
        for (int i = 0; i < d; i++)
            m += (size_t)snprintf(list + m, sizeof list - m, "%sdst + %d * stride", i ? ", " : "", i);
        n += (size_t)snprintf(s + n, cap - n,
            "extern \"C\" __global__ void cm%d(char *dst, unsigned long long stride, const char *src,"
            " unsigned long long bytes) {\n"
            "  char *const D[%d] = {%s};\n  mk::copy_multi<%d>(D, src, bytes);\n}\n"
            "extern \"C\" __global__ void tp%d(char *dst, unsigned long long stride, const char *src,"
            " unsigned long long bytes, unsigned flag) {\n"
            "  char *const D[%d] = {%s};\n  mk::to_packets<16, %d>(D, src, bytes, flag);\n}\n",
            d, d, list, d, d, d, list, d);
    }
    return s;
}

static bool setup(void) {
    CuDevice dev;
    int arch = 0;
    if (cu.cuDeviceGet(&dev, 0) != CU_OK || cu.cuDevicePrimaryCtxRetain(&ctx, dev) != CU_OK ||
        cu.cuCtxSetCurrent(ctx) != CU_OK || cu_device_arch(0, &arch) != MSCCLRT_SUCCESS)
        return false;
    char *src = kernel_source();
    void *cubin = NULL;
    size_t len = 0;
    mscclrt_result r = src ? cg_compile(src, arch, "device-library test kernels", &cubin, &len, NULL)
                           : MSCCLRT_ERR_SYSTEM;
    free(src);
    if (r != MSCCLRT_SUCCESS) {
        fprintf(stderr, "%s\n", mscclrt_last_error());
        return false;
    }
    CuResult e = cu.cuModuleLoadData(&mod, cubin);
    free(cubin);
    return e == CU_OK && cu.cuStreamCreate(&stream, CU_STREAM_FLAG_NON_BLOCKING) == CU_OK &&
           cu.cuStreamCreate(&side, CU_STREAM_FLAG_NON_BLOCKING) == CU_OK;
}

static CuFunction fn(const char *name) {
    CuFunction f = NULL;
    if (cu.cuModuleGetFunction(&f, mod, name) != CU_OK) fprintf(stderr, "no kernel %s\n", name);
    return f;
}

static bool launch(CuFunction f, void **args) {
    return f && cu.cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, stream, args, NULL) == CU_OK;
}

static bool finish(void) {
    for (int i = 0; i < 20000; i++) {   /* 2 s: a kernel waiting forever is a failure */
        CuResult r = cu.cuStreamQuery(stream);
        if (r == CU_OK) return true;
        if (r != CU_ERR_NOT_READY) return false;
        usleep(100);
    }
    fprintf(stderr, "kernel did not finish\n");
    return false;
}

/* Host packets of float data v[] (P = 16: {d0, flag, d1, flag}; P = 8: {d, flag}). */
static void pack(uint32_t *pk, const float *v, size_t n, int P, uint32_t flag) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        if (P == 16) {
            pk[(i / 2) * 4 + (i % 2) * 2] = bits;
            pk[(i / 2) * 4 + (i % 2) * 2 + 1] = flag;
        } else {
            pk[i * 2] = bits;
            pk[i * 2 + 1] = flag;
        }
    }
}

/* out = local + every source, sources 0..k/2 written before the launch and the rest (up to)
 * 2 ms into it, with the previous launch's flag left in place until then. */
static void t_reduce_packets(void) {
    const size_t n = 4096 + 64;   /* floats; not a multiple of the block's stride */
    const size_t bytes = n * 4, pbytes = 2 * bytes, stride = pbytes + 256;
    float *loc = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes), *v = malloc(bytes);
    uint32_t *pk = malloc(pbytes), *stale = malloc(pbytes);
    CuDevPtr dloc = 0, dout = 0, dpk = 0;
    CHECK_EQ_INT(CU_OK, cu.cuMemAlloc(&dloc, bytes));
    CHECK_EQ_INT(CU_OK, cu.cuMemAlloc(&dout, bytes));
    CHECK_EQ_INT(CU_OK, cu.cuMemAlloc(&dpk, MAXK * stride));
    if (!loc || !want || !got || !v || !pk || !stale || !dloc || !dout || !dpk) goto out;
    int bad = 0, runs = 0;
    for (int P = 8; P <= 16; P += 8)
        for (int k = 1; k <= MAXK; k++) {
            const uint32_t flag = (uint32_t)(100 + k * 2 + P);
            for (size_t i = 0; i < n; i++) loc[i] = want[i] = (float)(i % 7);
            cu.cuMemcpyHtoD(dloc, loc, bytes);
            cu.cuMemsetD8(dout, 0, bytes);
            for (int s = 0; s < k; s++) {
                for (size_t i = 0; i < n; i++) v[i] = (float)((i + 3 * (size_t)s) % 11) * (float)(s + 1);
                pack(stale, v, n, P, flag - 1);          /* last launch's packets */
                cu.cuMemcpyHtoD(dpk + s * stride, stale, pbytes);
            }
            cu.cuCtxSynchronize();
            for (int s = 0; s < k / 2 + 1 && s < k; s++) {   /* already here */
                for (size_t i = 0; i < n; i++) v[i] = (float)((i + 3 * (size_t)s) % 11) * (float)(s + 1);
                pack(pk, v, n, P, flag);
                cu.cuMemcpyHtoD(dpk + s * stride, pk, pbytes);
            }
            char name[32];
            snprintf(name, sizeof name, "rp%d_%d", k, P);
            unsigned long long st = stride, by = bytes;
            unsigned fl = flag;
            void *args[] = {&dout, &dloc, &dpk, &st, &by, &fl};
            if (!launch(fn(name), args)) { bad++; continue; }
            usleep(2000);
            for (int s = k / 2 + 1; s < k; s++) {              /* arriving while it waits */
                for (size_t i = 0; i < n; i++) v[i] = (float)((i + 3 * (size_t)s) % 11) * (float)(s + 1);
                pack(pk, v, n, P, flag);
                cu.cuMemcpyHtoDAsync(dpk + s * stride, pk, pbytes, side);
                cu.cuStreamSynchronize(side);
            }
            if (!finish()) { bad++; continue; }
            cu.cuMemcpyDtoH(got, dout, bytes);
            for (int s = 0; s < k; s++)
                for (size_t i = 0; i < n; i++) want[i] += (float)((i + 3 * (size_t)s) % 11) * (float)(s + 1);
            int wrong = 0;
            for (size_t i = 0; i < n; i++) wrong += got[i] != want[i];
            if (wrong) fprintf(stderr, "reduce_packets LL%d, %d sources: %d wrong\n", P, k, wrong);
            bad += wrong != 0;
            runs++;
        }
    CHECK_EQ_INT(0, bad);
    CHECK_EQ_INT(2 * MAXK, runs);
out:
    if (dloc) cu.cuMemFree(dloc);
    if (dout) cu.cuMemFree(dout);
    if (dpk) cu.cuMemFree(dpk);
    free(loc); free(want); free(got); free(v); free(pk); free(stale);
}

/* copy_multi and to_packets with 1..7 destinations: every destination gets the source, over
 * 16-byte, 4-byte and 1-byte aligned pointers and sizes with tails; nothing past the end. */
static void t_fanout(void) {
    const size_t cap = 70000, stride = 2 * cap + 512;
    unsigned char *src = malloc(cap), *got = malloc(2 * cap + 64);
    CuDevPtr dsrc = 0, ddst = 0;
    CHECK_EQ_INT(CU_OK, cu.cuMemAlloc(&dsrc, cap + 64));
    CHECK_EQ_INT(CU_OK, cu.cuMemAlloc(&ddst, MAXD * stride));
    if (!src || !got || !dsrc || !ddst) goto out;
    for (size_t i = 0; i < cap; i++) src[i] = (unsigned char)(i * 7 + 3);
    cu.cuMemcpyHtoD(dsrc, src, cap);
    static const struct { size_t off, bytes; } shapes[] = {{0, 65536}, {0, 65536 + 48},
                                                           {4, 4096 + 12}, {1, 1000 + 3}, {0, 16}};
    int bad = 0;
    for (int d = 1; d <= MAXD; d++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            const size_t off = shapes[si].off, bytes = shapes[si].bytes;
            /* copy_multi */
            cu.cuMemsetD8(ddst, 0xee, MAXD * stride);
            char name[16];
            snprintf(name, sizeof name, "cm%d", d);
            CuDevPtr dd = ddst + off, ds = dsrc + off;
            unsigned long long st = stride, by = bytes;
            void *a1[] = {&dd, &st, &ds, &by};
            if (!launch(fn(name), a1) || !finish()) { bad++; continue; }
            for (int k = 0; k < d; k++) {
                cu.cuMemcpyDtoH(got, ddst + k * stride + off, bytes + 16);
                if (memcmp(got, src + off, bytes) != 0 || got[bytes] != 0xee) {
                    fprintf(stderr, "copy_multi<%d> dst %d, offset %zu, %zu bytes: wrong\n", d, k,
                            off, bytes);
                    bad++;
                }
            }
            /* to_packets (LL16; data sizes multiples of 8, 8-byte aligned) */
            if (off % 8 || bytes % 8) continue;
            cu.cuMemsetD8(ddst, 0xee, MAXD * stride);
            snprintf(name, sizeof name, "tp%d", d);
            unsigned fl = 77;
            void *a2[] = {&dd, &st, &ds, &by, &fl};
            if (!launch(fn(name), a2) || !finish()) { bad++; continue; }
            for (int k = 0; k < d; k++) {
                cu.cuMemcpyDtoH(got, ddst + k * stride + off, 2 * bytes);
                const uint32_t *w = (const uint32_t *)got;
                int wrong = 0;
                for (size_t i = 0; i < bytes / 8 && !wrong; i++) {
                    uint32_t d0, d1;
                    memcpy(&d0, src + off + 8 * i, 4);
                    memcpy(&d1, src + off + 8 * i + 4, 4);
                    wrong = w[4 * i] != d0 || w[4 * i + 1] != 77 || w[4 * i + 2] != d1 ||
                            w[4 * i + 3] != 77;
                }
                if (wrong) fprintf(stderr, "to_packets<16, %d> dst %d, %zu bytes: wrong\n", d, k, bytes);
                bad += wrong;
            }
        }
    CHECK_EQ_INT(0, bad);
out:
    if (dsrc) cu.cuMemFree(dsrc);
    if (ddst) cu.cuMemFree(ddst);
    free(src);
    free(got);
}

int main(void) {
    int count = 0;
    if (cu_load() != MSCCLRT_SUCCESS || cu.cuDeviceGetCount(&count) != CU_OK || count < 1) {
        return harness_skip("a GPU", mscclrt_last_error());
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    TEST("gpu devlib kernels compile and load", CHECK(setup()));
    if (h_failed) return harness_report();
    TEST("gpu devlib reduce_packets with 1..9 sources, late packets, LL8 and LL16", t_reduce_packets());
    TEST("gpu devlib copy_multi and to_packets with 1..7 destinations", t_fanout());
    cu.cuModuleUnload(mod);
    cu.cuDevicePrimaryCtxRelease(0);
    return harness_report();
}
