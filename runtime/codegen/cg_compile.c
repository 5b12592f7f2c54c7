/*
 * cg_compile.c - NVRTC compilation of generated kernels, with the device library
 * (mscclrt_kernel_files[], embedded at build time) as in-memory headers, and a cubin cache:
 * in memory per process, and on disk under $MSCCLRT_CACHE_DIR (default ~/.cache/mscclrt)
 * through core/disk_cache.c (trusted directories and entries only, no links, atomic writes).
 * The key hashes source, headers, options, architecture and NVRTC version; an entry repeats
 * its key and carries a checksum of its cubin, so a truncated, corrupt or renamed entry is a
 * miss that the compile rewrites.
 */
#include "codegen/codegen.h"
#include "core/clock.h"
#include "core/disk_cache.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "cuda/cuda_driver.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct { const char *name; const char *text; } KernelFile;
extern const KernelFile mscclrt_kernel_files[];
extern const int mscclrt_kernel_nfiles;

#define CACHE_MAGIC "MSCCLRTC"
#define CACHE_VERSION 2u              /* 2: the header holds a checksum of the cubin */
#define CACHE_MAX_CUBIN ((size_t)1 << 30)
/* an entry: CACHE_MAGIC, then uint64 version, k1, k2, cubin length, cubin checksum, cubin */
#define CACHE_HDR (8 + 5 * sizeof(uint64_t))

uint64_t cg_hash(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* in-memory cache: a short list, searched under a lock (compiles are rare) */
typedef struct MemEntry {
    uint64_t k1, k2;
    void *cubin;
    size_t len;
    struct MemEntry *next;
} MemEntry;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static MemEntry *mem_head;

static bool mem_get(uint64_t k1, uint64_t k2, void **cubin, size_t *len) {
    bool hit = false;
    pthread_mutex_lock(&mem_lock);
    for (MemEntry *e = mem_head; e; e = e->next)
        if (e->k1 == k1 && e->k2 == k2) {
            *cubin = malloc(e->len);
            if (*cubin) {
                memcpy(*cubin, e->cubin, e->len);
                *len = e->len;
                hit = true;
            }
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    return hit;
}
static void mem_put(uint64_t k1, uint64_t k2, const void *cubin, size_t len) {
    MemEntry *e = malloc(sizeof *e);
    void *copy = malloc(len);
    if (!e || !copy) {
        free(e);
        free(copy);
        return;
    }
    memcpy(copy, cubin, len);
    *e = (MemEntry){k1, k2, copy, len, NULL};
    pthread_mutex_lock(&mem_lock);
    e->next = mem_head;
    mem_head = e;
    pthread_mutex_unlock(&mem_lock);
}

/* The entry name's cubin when it holds (k1, k2) intact; false on any mismatch (a miss). */
static bool disk_get(const DiskCache *c, const char *name, uint64_t k1, uint64_t k2,
                     void **cubin, size_t *len) {
    size_t n = 0;
    unsigned char *buf = (unsigned char *)dcache_read(c, name, CACHE_HDR + CACHE_MAX_CUBIN, &n);
    if (!buf) return false;
    uint64_t hdr[5]; /* version, k1, k2, length, checksum */
    bool ok = n > CACHE_HDR && !memcmp(buf, CACHE_MAGIC, 8);
    if (ok) memcpy(hdr, buf + 8, sizeof hdr);
    ok = ok && hdr[0] == CACHE_VERSION && hdr[1] == k1 && hdr[2] == k2 &&
         hdr[3] == n - CACHE_HDR && hdr[4] == cg_hash(buf + CACHE_HDR, n - CACHE_HDR, k1 ^ k2);
    if (!ok) {
        free(buf);
        LOG_INFO(LOG_SUB_CG, "kernel cache: ignoring %s/%s: not an intact entry for this key",
                 c->path, name);
        return false;
    }
    memmove(buf, buf + CACHE_HDR, n - CACHE_HDR);
    *cubin = buf;
    *len = n - CACHE_HDR;
    return true;
}

static void disk_put(const DiskCache *c, const char *name, uint64_t k1, uint64_t k2,
                     const void *cubin, size_t len) {
    unsigned char *buf = c->fd >= 0 ? malloc(CACHE_HDR + len) : NULL;
    if (!buf) return;   /* no cache, or only the cache is lost */
    uint64_t hdr[5] = {CACHE_VERSION, k1, k2, len, cg_hash(cubin, len, k1 ^ k2)};
    memcpy(buf, CACHE_MAGIC, 8);
    memcpy(buf + 8, hdr, sizeof hdr);
    memcpy(buf + CACHE_HDR, cubin, len);
    dcache_write(c, name, buf, CACHE_HDR + len);
    free(buf);
}

static mscclrt_result nvrtc_build(const char *src, const char *arch_opt, const char *what,
                                  void **cubin, size_t *len) {
    const bool ptx_only = cubin == NULL;
    const char *names[64], *texts[64];
    int nh = 0;
    for (int i = 0; i < mscclrt_kernel_nfiles && nh < 64; i++, nh++) {
        names[nh] = mscclrt_kernel_files[i].name;
        texts[nh] = mscclrt_kernel_files[i].text;
    }
    const char *opts[] = {arch_opt, "-std=c++17", "--fmad=false", "-DMSCCLRT_NVRTC=1"};
    NvrtcProgram prog = NULL;
    TRY(nvrtc_check(nvrtc.nvrtcCreateProgram(&prog, src, "mscclrt_kernel.cu", nh, texts, names),
                    "nvrtcCreateProgram"));
    mscclrt_result res = MSCCLRT_SUCCESS;
    NvrtcResult cr = nvrtc.nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    if (cr != 0) {
        size_t n = 0;
        char *log = NULL;
        if (nvrtc.nvrtcGetProgramLogSize(prog, &n) == 0 && (log = malloc(n + 1))) {
            nvrtc.nvrtcGetProgramLog(prog, log);
            log[n] = 0;
        }
        /* the error lines (warnings would hide them) and the two after each, at most 20
         * lines, into the message; all of it to INFO */
        char head[4096] = "";
        if (log) {
            const char *p = log;
            size_t used = 0;
            int lines = 0, tail = 0;
            while (*p && lines < 20 && used + 2 < sizeof head) {
                const char *e = strchr(p, '\n');
                size_t l = e ? (size_t)(e - p + 1) : strlen(p);
                const bool err = memmem(p, l, "error", 5) != NULL;
                if (err) tail = 3;
                if (tail > 0) {
                    tail--;
                    lines++;
                    if (used + l >= sizeof head) l = sizeof head - used - 1;
                    memcpy(head + used, p, l);
                    used += l;
                    head[used] = 0;
                }
                p += e ? (size_t)(e - p + 1) : strlen(p);
            }
            if (!head[0]) snprintf(head, sizeof head, "%.2000s", log);
            LOG_INFO(LOG_SUB_CG, "NVRTC log for %s:\n%s", what, log);
        }
        res = rt_fail(MSCCLRT_ERR_CUDA, "NVRTC compile of %s failed (%s):\n%s", what,
                      nvrtc.nvrtcGetErrorString(cr), head);
        free(log);
        goto out;
    }
    size_t n = 0;
    if (ptx_only) goto out;
    TRY_GOTO(nvrtc_check(nvrtc.nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize"), res, out);
    *cubin = malloc(n ? n : 1);
    if (!*cubin) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "NVRTC: out of memory for a %zu-byte cubin", n);
        goto out;
    }
    TRY_GOTO(nvrtc_check(nvrtc.nvrtcGetCUBIN(prog, *cubin), "nvrtcGetCUBIN"), res, fail);
    *len = n;
    goto out;
fail:
    free(*cubin);
    *cubin = NULL;
out:
    nvrtc.nvrtcDestroyProgram(&prog);
    return res;
}

mscclrt_result cg_check_source(const char *src, int arch, const char *what) {
    char arch_opt[64];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=compute_%d", arch);
    TRY(nvrtc_load());
    return nvrtc_build(src, arch_opt, what, NULL, NULL);
}

mscclrt_result cg_compile(const char *src, int arch, const char *what, void **cubin,
                          size_t *len, bool *cached) {
    *cubin = NULL;
    *len = 0;
    if (cached) *cached = false;
    char arch_opt[64];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    /* the key: source, every embedded header, options, NVRTC version (known once loaded) */
    uint64_t k1 = cg_hash(src, strlen(src), 1), k2 = cg_hash(src, strlen(src), 2);
    for (int i = 0; i < mscclrt_kernel_nfiles; i++) {
        const char *t = mscclrt_kernel_files[i].text;
        k1 = cg_hash(t, strlen(t), k1);
        k2 = cg_hash(t, strlen(t), k2 ^ 0x9e3779b97f4a7c15ull);
    }
    k1 = cg_hash(arch_opt, strlen(arch_opt), k1);
    k2 = cg_hash(arch_opt, strlen(arch_opt), k2);
    const uint64_t m1 = k1, m2 = k2; /* in-process key: the NVRTC version cannot change */
    if (mem_get(m1, m2, cubin, len)) {
        if (cached) *cached = true;
        return MSCCLRT_SUCCESS;
    }
    /* the compiler's identity: the library file when it is found in an explicit directory
     * (no dlopen of NVRTC on a cache hit: loading it costs ~7 ms), else its version */
    char ident[PATH_MAX + 64];
    if (nvrtc_identity(ident, sizeof ident)) {
        k1 = cg_hash(ident, strlen(ident), k1);
        k2 = cg_hash(ident, strlen(ident), k2);
    } else {
        TRY(nvrtc_load());
        int ver = nvrtc.major * 1000 + nvrtc.minor;
        k1 = cg_hash(&ver, sizeof ver, k1);
        k2 = cg_hash(&ver, sizeof ver, k2);
    }
    char root[PATH_MAX], name[96];
    DiskCache dc;
    dcache_root(param_str(PARAM_CACHE_DIR), root, sizeof root);
    dcache_open(&dc, root, NULL);   /* fd -1 (logged) when off or untrusted: no disk cache */
    snprintf(name, sizeof name, "%016llx%016llx-sm%d.cubin", (unsigned long long)k1,
             (unsigned long long)k2, arch);
    if (disk_get(&dc, name, k1, k2, cubin, len)) {
        mem_put(m1, m2, *cubin, *len);
        if (cached) *cached = true;
        LOG_INFO(LOG_SUB_CG, "%s: cubin from cache %s/%s", what, dc.path, name);
        dcache_close(&dc);
        return MSCCLRT_SUCCESS;
    }
    double t0 = rt_now_s();
    mscclrt_result res;
    TRY_GOTO(nvrtc_load(), res, out);
    TRY_GOTO(nvrtc_build(src, arch_opt, what, cubin, len), res, out);
    LOG_INFO(LOG_SUB_CG, "%s: compiled for sm_%d in %.2f s (%zu bytes)", what, arch,
             rt_now_s() - t0, *len);
    mem_put(m1, m2, *cubin, *len);
    disk_put(&dc, name, k1, k2, *cubin, *len);   /* a no-op when dc is off */
out:
    dcache_close(&dc);
    return res;
}
