/*
 * algo_registry.c - algorithms and what they serve (plan-based: from the plan itself; native:
 * from the caller's description), the process-wide collection, the one selector, and the
 * selection chain: candidates that fit a request (registered plan-based, registered native,
 * then the communicator's default collection), the user's selector, else the default one.
 *
 * Everything an algorithm serves is its own: its buffer mode comes from its plan's "inplace"
 * and its size rules from its plan's geometry, checked per request; the reduction operator is
 * an argument of every call. Nothing is cached across algorithms (MSCCL++ kept one DSL buffer
 * mode for the whole process in a static), and the collection carries an epoch so that
 * callers caching choices can see it change.
 */
#include "algo/algo.h"
#include "core/api_plan.h"
#include "core/err.h"
#include "core/log.h"
#include "exec/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALGO_NAME_MAX 256             /* bytes of a name, without the NUL */
#define ALGO_SOURCE_MAX (16u << 20)   /* a native algorithm's source file */
#define ALGO_MAX_BLOCKS 1024
#define ALGO_MAX_THREADS 1024

/* ---- collectives ------------------------------------------------------------------------------ */

static const char *const coll_names[MSCCLRT_COLL_COUNT] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
    "alltoall", "gather", "scatter", "sendrecv",
};

MSCCLRT_API const char *mscclrt_coll_name(mscclrt_coll c) {
    return (unsigned)c < MSCCLRT_COLL_COUNT ? coll_names[c] : "invalid";
}

bool algo_coll_from_name(const char *name, mscclrt_coll *out) {
    for (int c = 0; name && c < MSCCLRT_COLL_COUNT; c++)
        if (strcmp(name, coll_names[c]) == 0) {
            *out = (mscclrt_coll)c;
            return true;
        }
    return false;
}

MSCCLRT_API mscclrt_result mscclrt_coll_parse(const char *name, mscclrt_coll *out) {
    if (!name || !out)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_coll_parse: %s argument is NULL",
                       name ? "out" : "name");
    if (algo_coll_from_name(name, out)) return MSCCLRT_SUCCESS;
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "unknown collective '%s' (expected allreduce, "
                   "allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter or "
                   "sendrecv)", name);
}

/* The collective of a plan's model; false for test and custom plans. */
static bool coll_of_plan(PlanCollective pc, mscclrt_coll *out) {
    switch (pc) {
    case PLAN_COLL_ALLREDUCE: *out = MSCCLRT_COLL_ALLREDUCE; return true;
    case PLAN_COLL_ALLGATHER: *out = MSCCLRT_COLL_ALLGATHER; return true;
    case PLAN_COLL_REDUCESCATTER: *out = MSCCLRT_COLL_REDUCESCATTER; return true;
    case PLAN_COLL_ALLTOALL: *out = MSCCLRT_COLL_ALLTOALL; return true;
    case PLAN_COLL_BROADCAST: *out = MSCCLRT_COLL_BROADCAST; return true;
    case PLAN_COLL_SENDRECV: *out = MSCCLRT_COLL_SENDRECV; return true;
    case PLAN_COLL_REDUCE: *out = MSCCLRT_COLL_REDUCE; return true;
    case PLAN_COLL_GATHER: *out = MSCCLRT_COLL_GATHER; return true;
    case PLAN_COLL_SCATTER: *out = MSCCLRT_COLL_SCATTER; return true;
    default: return false;
    }
}

static bool coll_reduces(mscclrt_coll c) {
    return c == MSCCLRT_COLL_ALLREDUCE || c == MSCCLRT_COLL_REDUCESCATTER || c == MSCCLRT_COLL_REDUCE;
}

static bool coll_rooted(mscclrt_coll c) {
    return c == MSCCLRT_COLL_BROADCAST || c == MSCCLRT_COLL_REDUCE || c == MSCCLRT_COLL_GATHER ||
           c == MSCCLRT_COLL_SCATTER;
}

/* ---- algorithms ------------------------------------------------------------------------------- */

void algo_retain(const mscclrt_algo *a) {
    __atomic_add_fetch(&((mscclrt_algo *)a)->refs, 1, __ATOMIC_RELAXED);
}

static void algo_destroy(mscclrt_algo *a) {
    free((char *)a->desc.name);
    free((char *)a->desc.tags);
    free(a->source);
    free(a->kernel);
    if (a->own_plan) mscclrt_plan_free((mscclrt_plan *)a->plan);
    a->magic = 0;
    free(a);
}

void algo_release(const mscclrt_algo *a) {
    if (!a) return;
    mscclrt_algo *m = (mscclrt_algo *)a;
    if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) algo_destroy(m);
}

const mscclrt_algo *algo_check(const mscclrt_algo *a) {
    return a && a->magic == ALGO_MAGIC && __atomic_load_n(&a->refs, __ATOMIC_RELAXED) > 0 ? a
                                                                                             : NULL;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Checks the fields every description must get right. */
static mscclrt_result desc_check(const mscclrt_algo_desc *d, const char *fn) {
    if (d->name) {
        size_t n = strlen(d->name);
        if (n == 0 || n > ALGO_NAME_MAX)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->name must have 1..%d bytes, not %zu",
                           fn, ALGO_NAME_MAX, n);
        for (const char *p = d->name; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->name '%s' contains a control "
                               "character", fn, d->name);
    }
    if ((unsigned)d->collective >= MSCCLRT_COLL_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->collective %d is not a collective",
                       fn, (int)d->collective);
    if (d->max_bytes && d->min_bytes > d->max_bytes)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->min_bytes %" PRIu64 " is above "
                       "desc->max_bytes %" PRIu64, fn, d->min_bytes, d->max_bytes);
    if (d->min_arch < 0 || d->max_arch < 0 || (d->max_arch && d->min_arch > d->max_arch))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc architectures [%d, %d] are not a range "
                       "of compute capabilities x10 (0: no bound)", fn, d->min_arch, d->max_arch);
    if (d->world_size < 0 || d->ranks_per_node < 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->%s %d is negative", fn,
                       d->world_size < 0 ? "world_size" : "ranks_per_node",
                       d->world_size < 0 ? d->world_size : d->ranks_per_node);
    if (d->world_size && d->ranks_per_node && d->world_size % d->ranks_per_node)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->world_size %d is not a multiple of "
                       "desc->ranks_per_node %d", fn, d->world_size, d->ranks_per_node);
    if ((unsigned)d->buffer_mode > MSCCLRT_BUFFER_OUTOFPLACE)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->buffer_mode %d is not a buffer mode",
                       fn, (int)d->buffer_mode);
    return MSCCLRT_SUCCESS;
}

/* A new algorithm holding one reference, with copies of desc's strings (name required). */
static mscclrt_result algo_new(mscclrt_algo_kind kind, const mscclrt_algo_desc *d,
                               mscclrt_algo **out, const char *fn) {
    mscclrt_algo *a = calloc(1, sizeof *a);
    if (!a) return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    a->magic = ALGO_MAGIC;
    a->refs = 1;
    a->kind = kind;
    a->desc = *d;
    a->desc.name = dup_str(d->name);
    a->desc.tags = dup_str(d->tags ? d->tags : "");
    if (!a->desc.name || !a->desc.tags) {
        algo_destroy(a);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    }
    *out = a;
    return MSCCLRT_SUCCESS;
}

/* The plan's own tags, joined with ','; NULL on out of memory. */
static char *plan_tags(const Plan *p) {
    size_t n = 1;
    for (int i = 0; i < p->ntags; i++) n += strlen(p->tags[i]) + 1;
    char *s = malloc(n), *w = s;
    if (!s) return NULL;
    for (int i = 0; i < p->ntags; i++) {
        size_t l = strlen(p->tags[i]);
        if (i) *w++ = ',';
        memcpy(w, p->tags[i], l);
        w += l;
    }
    *w = 0;
    return s;
}

MSCCLRT_API mscclrt_result mscclrt_algo_from_plan(mscclrt_algo **out, const mscclrt_plan *plan,
                                                  const mscclrt_algo_desc *desc) {
    static const char fn[] = "mscclrt_algo_from_plan";
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: out argument is NULL", fn);
    *out = NULL;
    const Plan *p = api_plan_model(plan);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan argument is %s", fn,
                           plan ? "not a live plan" : "NULL");
    if (desc) TRY(desc_check(desc, fn));
    mscclrt_algo_desc d = {0};
    /* the collective: the plan's; desc may only repeat it (0 is allreduce, also "unset"),
     * except for test/custom plans, whose collective desc must give */
    mscclrt_coll pc;
    if (coll_of_plan(p->collective, &pc)) {
        if (desc && desc->collective != MSCCLRT_COLL_ALLREDUCE && desc->collective != pc)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan '%s' is a %s plan, desc->collective "
                           "says %s", fn, p->name, coll_names[pc], coll_names[desc->collective]);
        d.collective = pc;
    } else {
        if (!desc)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan '%s' has collective '%s': say which "
                           "collective it serves in desc->collective", fn, p->name,
                           p->collective_name);
        d.collective = desc->collective;
    }
    d.name = desc && desc->name ? desc->name : p->name;
    d.min_bytes = desc && desc->min_bytes ? desc->min_bytes : p->min_size;
    d.max_bytes = desc && desc->max_bytes ? desc->max_bytes
                                          : (p->max_size == UINT64_MAX ? 0 : p->max_size);
    if (d.max_bytes && d.min_bytes > d.max_bytes)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan '%s': sizes [%" PRIu64 ", %" PRIu64
                       "] are empty", fn, p->name, d.min_bytes, d.max_bytes);
    d.min_arch = desc ? desc->min_arch : 0;
    d.max_arch = desc ? desc->max_arch : 0;
    d.world_size = p->ngpus;
    if (desc && desc->world_size && desc->world_size != p->ngpus)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan '%s' has %d ranks, desc->world_size "
                       "says %d", fn, p->name, p->ngpus, desc->world_size);
    d.ranks_per_node = desc ? desc->ranks_per_node : 0;
    if (d.ranks_per_node && p->ngpus % d.ranks_per_node)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan '%s' has %d ranks, not a multiple of "
                       "desc->ranks_per_node %d", fn, p->name, p->ngpus, d.ranks_per_node);
    /* an in-place plan addresses only the input buffer: it cannot run out of place */
    d.buffer_mode = p->inplace ? MSCCLRT_BUFFER_INPLACE : MSCCLRT_BUFFER_OUTOFPLACE;
    if (desc && desc->buffer_mode) {
        if (p->inplace && desc->buffer_mode != MSCCLRT_BUFFER_INPLACE)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan '%s' is in place (it addresses "
                           "only the input buffer): desc->buffer_mode must be in place", fn,
                           p->name);
        d.buffer_mode = desc->buffer_mode;
    }
    char *tags = desc && desc->tags ? NULL : plan_tags(p);
    if (!(desc && desc->tags) && !tags) return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    d.tags = desc && desc->tags ? desc->tags : tags;
    mscclrt_algo *a;
    mscclrt_result res = algo_new(MSCCLRT_ALGO_PLAN, &d, &a, fn);
    free(tags);
    TRY(res);
    a->plan = plan;
    a->needs_symmetric = exec_plan_keys_buffers(p);
    *out = a;
    LOG_INFO(LOG_SUB_PLAN, "algorithm '%s': plan '%s' (%s, %d ranks, %s, [%" PRIu64 ", %" PRIu64
             "] bytes%s)", a->desc.name, p->name, coll_names[d.collective], p->ngpus,
             d.buffer_mode == MSCCLRT_BUFFER_INPLACE    ? "in place"
             : d.buffer_mode == MSCCLRT_BUFFER_OUTOFPLACE ? "out of place"
                                                         : "any buffers",
             d.min_bytes, d.max_bytes, a->needs_symmetric ? ", needs symmetric buffers" : "");
    return MSCCLRT_SUCCESS;
}

static bool c_identifier(const char *s) {
    if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

static mscclrt_result native_new(mscclrt_algo **out, const char *source, const char *kernel,
                                 const mscclrt_algo_desc *desc, const char *fn) {
    if (!kernel || !c_identifier(kernel) || strlen(kernel) > ALGO_NAME_MAX)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: kernel %s%s%s is not a C identifier (the "
                       "extern \"C\" __global__ function's name)", fn, kernel ? "'" : "",
                       kernel ? kernel : "argument NULL", kernel ? "'" : "");
    if (!desc) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc is NULL (desc->name and "
                              "desc->collective are required)", fn);
    if (!desc->name) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: desc->name is NULL", fn);
    TRY(desc_check(desc, fn));
    mscclrt_algo *a;
    TRY(algo_new(MSCCLRT_ALGO_NATIVE, desc, &a, fn));
    a->source = dup_str(source);
    a->kernel = dup_str(kernel);
    if (!a->source || !a->kernel) {
        algo_destroy(a);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    }
    a->reduces = coll_reduces(desc->collective);
    a->default_blocks = a->default_threads = 0;   /* the native layer decides */
    *out = a;
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_algo_from_source(mscclrt_algo **out, const char *source,
                                                    const char *kernel,
                                                    const mscclrt_algo_desc *desc) {
    static const char fn[] = "mscclrt_algo_from_source";
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: out argument is NULL", fn);
    *out = NULL;
    if (!source) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: source argument is NULL", fn);
    return native_new(out, source, kernel, desc, fn);
}

/* The whole of a regular file as a NUL-terminated string (at most max bytes). */
static mscclrt_result read_text(const char *path, size_t max, char **text, size_t *len,
                                const char *fn) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return rt_fail_errno(MSCCLRT_ERR_INVALID_ARG, "%s: %s: cannot open", fn, path);
    struct stat st;
    mscclrt_result res = MSCCLRT_SUCCESS;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        res = rt_fail_errno(MSCCLRT_ERR_SYSTEM, "%s: %s: fstat", fn, path);
        goto out;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: %s: %s", fn, path,
                      !S_ISREG(st.st_mode) ? "not a regular file" : "larger than the limit");
        goto out;
    }
    size_t n = (size_t)st.st_size, got = 0;
    buf = malloc(n + 1);
    if (!buf) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "%s: %s: out of memory", fn, path);
        goto out;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            res = r < 0 ? rt_fail_errno(MSCCLRT_ERR_SYSTEM, "%s: %s: read", fn, path)
                        : rt_fail(MSCCLRT_ERR_SYSTEM, "%s: %s: shorter than its size", fn, path);
            goto out;
        }
        got += (size_t)r;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return res;
}

MSCCLRT_API mscclrt_result mscclrt_algo_from_file(mscclrt_algo **out, const char *path,
                                                  const char *kernel,
                                                  const mscclrt_algo_desc *desc) {
    static const char fn[] = "mscclrt_algo_from_file";
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: out argument is NULL", fn);
    *out = NULL;
    if (!path) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: path argument is NULL", fn);
    char *text = NULL;
    size_t len = 0;
    TRY(read_text(path, ALGO_SOURCE_MAX, &text, &len, fn));
    if (strlen(text) != len) {
        free(text);
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: %s: contains a NUL byte (not CUDA source)",
                       fn, path);
    }
    mscclrt_result res = native_new(out, text, kernel, desc, fn);
    free(text);
    return res;
}

MSCCLRT_API void mscclrt_algo_free(mscclrt_algo *algo) {
    if (!algo_check(algo)) return;
    algo_release(algo);
}

MSCCLRT_API mscclrt_result mscclrt_algo_get_desc(const mscclrt_algo *algo, mscclrt_algo_desc *desc) {
    if (!algo_check(algo))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_get_desc: algo argument is %s",
                       algo ? "not a live algorithm" : "NULL");
    if (!desc) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_get_desc: desc argument is NULL");
    *desc = algo->desc;
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_algo_kind mscclrt_algo_kind_of(const mscclrt_algo *algo) {
    if (!algo_check(algo)) {
        rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_kind_of: algo argument is %s",
                algo ? "not a live algorithm" : "NULL");
        return MSCCLRT_ALGO_PLAN;
    }
    return algo->kind;
}

MSCCLRT_API mscclrt_result mscclrt_algo_clean_cached_contexts(mscclrt_algo *algo) {
    if (!algo_check(algo))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_clean_cached_contexts: algo "
                       "argument is %s", algo ? "not a live algorithm" : "NULL");
    /* communicators compare their contexts' generation with this one and drop older ones on
     * their next use of the algorithm (runtime/exec, algo_native.c) */
    uint64_t g = __atomic_add_fetch(&algo->generation, 1, __ATOMIC_SEQ_CST);
    LOG_INFO(LOG_SUB_EXEC, "algorithm '%s': contexts of generation < %" PRIu64 " dropped on next use",
             algo->desc.name, g);
    return MSCCLRT_SUCCESS;
}

/* ---- the collection --------------------------------------------------------------------------- */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const mscclrt_algo **v;       /* references held; registration order */
    int n, cap;
    mscclrt_selector_fn sel;      /* NULL: the default selector */
    void *sel_user;
    uint64_t epoch;               /* changes of v and sel */
} R;

void algo_registry_bump_epoch(void) {
    __atomic_add_fetch(&R.epoch, 1, __ATOMIC_RELEASE);
}

uint64_t algo_registry_epoch(void) {
    return __atomic_load_n(&R.epoch, __ATOMIC_ACQUIRE);   /* every call of the hot path reads it */
}

static int reg_find(const char *name) {
    for (int i = 0; i < R.n; i++)
        if (strcmp(R.v[i]->desc.name, name) == 0) return i;
    return -1;
}

MSCCLRT_API mscclrt_result mscclrt_algo_register(mscclrt_algo *algo) {
    if (!algo_check(algo))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_register: algo argument is %s",
                       algo ? "not a live algorithm" : "NULL");
    pthread_mutex_lock(&reg_mu);
    if (reg_find(algo->desc.name) >= 0) {
        pthread_mutex_unlock(&reg_mu);
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_algo_register: an algorithm named "
                       "'%s' is already registered (unregister it first)", algo->desc.name);
    }
    if (R.n == R.cap) {
        int cap = R.cap ? 2 * R.cap : 16;
        const mscclrt_algo **v = realloc(R.v, (size_t)cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&reg_mu);
            return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_algo_register: out of memory");
        }
        R.v = v;
        R.cap = cap;
    }
    algo_retain(algo);
    R.v[R.n++] = algo;
    __atomic_add_fetch(&R.epoch, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&reg_mu);
    LOG_INFO(LOG_SUB_INIT, "registered algorithm '%s' (%s, %s)", algo->desc.name,
             coll_names[algo->desc.collective],
             algo->kind == MSCCLRT_ALGO_PLAN ? "plan-based" : "native");
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_algo_unregister(const char *name) {
    if (!name) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_unregister: name argument is NULL");
    pthread_mutex_lock(&reg_mu);
    int i = reg_find(name);
    if (i < 0) {
        pthread_mutex_unlock(&reg_mu);
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_unregister: no registered "
                       "algorithm is named '%s'", name);
    }
    const mscclrt_algo *a = R.v[i];
    memmove(&R.v[i], &R.v[i + 1], (size_t)(R.n - i - 1) * sizeof *R.v);
    R.n--;
    __atomic_add_fetch(&R.epoch, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&reg_mu);
    algo_release(a);
    return MSCCLRT_SUCCESS;
}

bool algo_is_registered(const mscclrt_algo *a) {
    bool found = false;
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < R.n && !found; i++) found = R.v[i] == a;
    pthread_mutex_unlock(&reg_mu);
    return found;
}

/* The registered algorithms of coll (MSCCLRT_COLL_COUNT: all) in selection order, plan-based
 * then native, each in registration order; up to max into v (retained when retain). Returns
 * how many there are. Caller holds reg_mu. */
static int reg_ordered(mscclrt_coll coll, const mscclrt_algo **v, int max, bool retain) {
    int k = 0;
    for (int pass = 0; pass < 2; pass++) {
        mscclrt_algo_kind kind = pass == 0 ? MSCCLRT_ALGO_PLAN : MSCCLRT_ALGO_NATIVE;
        for (int i = 0; i < R.n; i++) {
            const mscclrt_algo *a = R.v[i];
            if (a->kind != kind || (coll != MSCCLRT_COLL_COUNT && a->desc.collective != coll))
                continue;
            if (k < max) {
                v[k] = a;
                if (retain) algo_retain(a);
            }
            k++;
        }
    }
    return k;
}

MSCCLRT_API mscclrt_result mscclrt_algo_list(mscclrt_coll coll, const mscclrt_algo **algos,
                                             int max, int *n) {
    if ((unsigned)coll > MSCCLRT_COLL_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_list: coll %d is not a collective "
                       "(nor MSCCLRT_COLL_COUNT for all)", (int)coll);
    if (!n || max < 0 || (max > 0 && !algos))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_list: %s", !n ? "n argument is NULL"
                       : max < 0 ? "max is negative" : "algos argument is NULL with max > 0");
    pthread_mutex_lock(&reg_mu);
    *n = reg_ordered(coll, algos, max, false);
    pthread_mutex_unlock(&reg_mu);
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API const mscclrt_algo *mscclrt_algo_find(const char *name) {
    if (!name) return NULL;
    pthread_mutex_lock(&reg_mu);
    int i = reg_find(name);
    const mscclrt_algo *a = i >= 0 ? R.v[i] : NULL;
    pthread_mutex_unlock(&reg_mu);
    return a;
}

MSCCLRT_API mscclrt_result mscclrt_set_selector(mscclrt_selector_fn fn, void *user) {
    pthread_mutex_lock(&reg_mu);
    R.sel = fn;
    R.sel_user = fn ? user : NULL;
    __atomic_add_fetch(&R.epoch, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&reg_mu);
    LOG_INFO(LOG_SUB_INIT, "%s", fn ? "selector set" : "default selector restored");
    return MSCCLRT_SUCCESS;
}

/* ---- fitting ---------------------------------------------------------------------------------- */

static _Thread_local char why_buf[512];

/* Formats the reason only when asked for it: candidates are filtered on every selection. */
__attribute__((format(printf, 2, 3))) static bool no_fit(const char **why, const char *fmt, ...) {
    if (!why) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why_buf, sizeof why_buf, fmt, ap);
    va_end(ap);
    *why = why_buf;
    return false;
}

bool algo_tag_int(const char *tags, const char *key, long *out) {
    size_t kl = strlen(key);
    for (const char *p = tags; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            char *end;
            errno = 0;
            long v = strtol(p + kl + 1, &end, 10);
            if (end != p + kl + 1 && errno == 0 && (end == p + l || *end == ' ')) {
                *out = v;
                return true;
            }
        }
        p += l;
    }
    return false;
}

/* Per-rank byte counts of a message for a plan-based algorithm: mscclrt_plan_call_sizes' rule
 * for plans of a known collective, the algorithm's collective for test/custom plans. */
static void call_sizes(const mscclrt_algo *a, const Plan *p, uint64_t bytes, uint64_t *in,
                       uint64_t *out) {
    mscclrt_coll pc;
    if (coll_of_plan(p->collective, &pc)) {
        plan_call_sizes(p, bytes, in, out);
        return;
    }
    uint64_t ic = p->ngpus ? p->gpus[0].input_chunks : 1, oc = p->ngpus ? p->gpus[0].output_chunks : 1;
    mscclrt_coll c = a->desc.collective;
    *in = *out = bytes;
    if ((c == MSCCLRT_COLL_ALLGATHER || c == MSCCLRT_COLL_GATHER) && oc)
        *in = (uint64_t)((unsigned __int128)bytes * ic / oc);
    if ((c == MSCCLRT_COLL_REDUCESCATTER || c == MSCCLRT_COLL_SCATTER) && ic)
        *out = (uint64_t)((unsigned __int128)bytes * oc / ic);
}

static bool plan_fits(const mscclrt_algo *a, const mscclrt_request *req, size_t esz,
                      const char **why) {
    const Plan *p = api_plan_model(a->plan);
    if (!p) return no_fit(why, "its plan was freed");
    if (p->ngpus != req->world_size)
        return no_fit(why, "its plan has %d ranks, not %d", p->ngpus, req->world_size);
    if (a->desc.collective == MSCCLRT_COLL_SENDRECV && req->peer >= 0)
        return no_fit(why, "a plan moves the whole group's data: a send or receive with one peer "
                      "needs a native algorithm");
    uint64_t in, out;
    call_sizes(a, p, req->message_bytes, &in, &out);
    if (in != req->in_bytes || out != req->out_bytes)
        return no_fit(why, "a message of %" PRIu64 " bytes has %" PRIu64 " input and %" PRIu64
                      " output bytes per rank in its plan, not %" PRIu64 " and %" PRIu64,
                      req->message_bytes, in, out, req->in_bytes, req->out_bytes);
    /* chunks, and the slices of thread-block groups, are multiples of the alignment (spec
     * §3.2-3.4): a reduction needs whole elements in each, so the alignment must hold them */
    if (coll_reduces(a->desc.collective) && p->alignment % esz)
        return no_fit(why, "its plan's buffer_alignment %u splits %s elements of %zu bytes",
                      p->alignment, mscclrt_dtype_name(req->dtype), esz);
    for (int r = 0; r < p->ngpus; r++) {
        PlanGeom g;
        PlanErr e;
        if (!plan_geom(p, r, in, out, &g, &e)) return no_fit(why, "%s", e.msg);
        /* MSCCL++'s fixed scratch: larger chunks would need offsets wrapped, which the GPU
         * executor refuses (exec_size_get); another algorithm serves such a call */
        if (p->reuse_resources && p->gpus[r].scratch_chunks &&
            plan_scratch_bytes(p, r, g.chunk_bytes, 256) > g.scratch_bytes)
            return no_fit(why, "its reuse_resources plan's fixed scratch of %" PRIu64 " bytes "
                          "holds rank %d's chunks of %" PRIu64 " bytes only below this size",
                          g.scratch_bytes, r, g.chunk_bytes);
    }
    return true;
}

bool algo_fits(const mscclrt_algo *a, const mscclrt_request *req, const char **why) {
    if (!algo_check(a)) return no_fit(why, "not a live algorithm");
    const mscclrt_algo_desc *d = &a->desc;
    if (req->collective != d->collective)
        return no_fit(why, "it serves %s, not %s", coll_names[d->collective],
                      mscclrt_coll_name(req->collective));
    if (req->message_bytes < d->min_bytes)
        return no_fit(why, "%" PRIu64 " bytes is below its minimum of %" PRIu64,
                      req->message_bytes, d->min_bytes);
    if (d->max_bytes && req->message_bytes > d->max_bytes)
        return no_fit(why, "%" PRIu64 " bytes is above its maximum of %" PRIu64,
                      req->message_bytes, d->max_bytes);
    if (d->min_arch && req->arch < d->min_arch)
        return no_fit(why, "sm_%d is below its minimum architecture sm_%d", req->arch, d->min_arch);
    if (d->max_arch && req->arch > d->max_arch)
        return no_fit(why, "sm_%d is above its maximum architecture sm_%d", req->arch, d->max_arch);
    if (d->world_size && d->world_size != req->world_size)
        return no_fit(why, "it is for %d ranks, not %d", d->world_size, req->world_size);
    if (d->ranks_per_node && d->ranks_per_node != req->ranks_per_node)
        return no_fit(why, "it is for %d ranks per node, not %d", d->ranks_per_node,
                      req->ranks_per_node);
    /* inplace 2: the ranks cannot agree on the mode (rooted collectives), only "any" fits */
    if (d->buffer_mode == MSCCLRT_BUFFER_INPLACE && req->inplace != 1)
        return no_fit(why, "it runs only in place");
    if (d->buffer_mode == MSCCLRT_BUFFER_OUTOFPLACE && req->inplace != 0)
        return no_fit(why, "it runs only out of place");
    if (a->needs_symmetric && !req->symmetric)
        return no_fit(why, "it reads or writes peers' input/output buffers, which must lie in "
                      "windows registered on the communicator");
    size_t esz = (unsigned)req->dtype < MSCCLRT_DTYPE_COUNT ? mscclrt_dtype_size(req->dtype) : 0;
    if (!esz) return no_fit(why, "data type %d is not a data type", (int)req->dtype);
    if (a->kind == MSCCLRT_ALGO_PLAN && coll_rooted(d->collective)) {
        long root = 0;
        algo_tag_int(d->tags, "root", &root);
        if (req->root != root)
            return no_fit(why, "its plan's root is rank %ld, not %d", root, req->root);
    }
    return a->kind == MSCCLRT_ALGO_PLAN ? plan_fits(a, req, esz, why) : true;
}

/* ---- selection -------------------------------------------------------------------------------- */

static const char *mode_name(const mscclrt_request *req) {
    return req->inplace == 1 ? "in place" : req->inplace == 0 ? "out of place" : "any buffers";
}

/* Across nodes the default collection holds only the multi-node stdlib programs: the "no
 * algorithm" messages say so (after ": " when first, else after "; "), since a caller used to
 * one node expects the native algorithms to catch everything. "" on one node. */
static const char *spans_nodes_note(const mscclrt_request *req, bool first) {
#define SPANS_NODES "the communicator spans nodes: only the multi-node stdlib programs and " \
                    "registered algorithms serve it (no native algorithms)"
    if (req->ranks_per_node == req->world_size) return "";
    return first ? ": " SPANS_NODES : "; " SPANS_NODES;
#undef SPANS_NODES
}

static mscclrt_result check_request(const mscclrt_request *req, const char *fn) {
    if ((unsigned)req->collective >= MSCCLRT_COLL_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: req->collective %d is not a collective", fn,
                       (int)req->collective);
    if ((unsigned)req->dtype >= MSCCLRT_DTYPE_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: req->dtype %d is not a data type", fn,
                       (int)req->dtype);
    return MSCCLRT_SUCCESS;
}

/* A user selector's answer, checked as strictly as our own: it must fit. */
static mscclrt_result check_choice(const mscclrt_request *req, const mscclrt_choice *c) {
    const char *why;
    if (!c->algo)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "selector: returned 1 (a choice) with no "
                       "algorithm for %s of %" PRIu64 " bytes", coll_names[req->collective],
                       req->message_bytes);
    if (!algo_check(c->algo))
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "selector: chose a handle that is not a live "
                       "algorithm for %s of %" PRIu64 " bytes", coll_names[req->collective],
                       req->message_bytes);
    if (!algo_fits(c->algo, req, &why))
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "selector: chose '%s' for %s of %" PRIu64
                       " bytes (%s, %s), which does not fit: %s", c->algo->desc.name,
                       coll_names[req->collective], req->message_bytes,
                       mscclrt_dtype_name(req->dtype), mode_name(req), why);
    if (c->blocks < 0 || c->blocks > ALGO_MAX_BLOCKS)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "selector: chose %d blocks for '%s' (0, the "
                       "algorithm's own, or up to %d)", c->blocks, c->algo->desc.name,
                       ALGO_MAX_BLOCKS);
    if (c->threads < 0 || c->threads > ALGO_MAX_THREADS || c->threads % 32)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "selector: chose %d threads per block for '%s' "
                       "(0, the algorithm's own, or a multiple of 32 up to %d)", c->threads,
                       c->algo->desc.name, ALGO_MAX_THREADS);
    return MSCCLRT_SUCCESS;
}

mscclrt_result algo_select_from(const mscclrt_request *req, const mscclrt_algo *const *cand,
                                int n, mscclrt_choice *choice) {
    const AlgoTuning *tun;
    TRY(algo_tuning_process(&tun));
    TRY(check_request(req, "selection"));
    if (n <= 0)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "no algorithm serves %s of %" PRIu64 " bytes "
                       "(%s, %s, %d ranks, %d per node)%s", coll_names[req->collective],
                       req->message_bytes, mscclrt_dtype_name(req->dtype), mode_name(req),
                       req->world_size, req->ranks_per_node, spans_nodes_note(req, true));
    pthread_mutex_lock(&reg_mu);
    mscclrt_selector_fn fn = R.sel;
    void *user = R.sel_user;
    pthread_mutex_unlock(&reg_mu);
    if (fn) {
        mscclrt_choice c = {0};
        int r = fn(req, cand, n, &c, user);
        if (r == 1) {
            TRY(check_choice(req, &c));
            *choice = c;
            return MSCCLRT_SUCCESS;
        }
        if (r < 0)   /* the selector failed and reported why itself (e.g. a Python traceback) */
            return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "selector: failed (returned %d) for %s of %"
                           PRIu64 " bytes; the selector's own report says why", r,
                           coll_names[req->collective], req->message_bytes);
        if (r != 0)
            return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "selector: returned %d for %s of %" PRIu64
                           " bytes (1: a choice, 0: no opinion, < 0: failed)", r,
                           coll_names[req->collective], req->message_bytes);
    }
    if (!algo_default_select_with(tun, req, cand, n, choice))
        return rt_fail(MSCCLRT_ERR_INTERNAL, "default selector: no choice among %d candidates", n);
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API int mscclrt_algo_fits(const mscclrt_algo *algo, const mscclrt_request *req,
                                  const char **why) {
    const char *w = NULL;
    if (!algo_check(algo)) w = "not a live algorithm";
    else if (!req) w = "no request";
    else if ((unsigned)req->collective >= MSCCLRT_COLL_COUNT) w = "the request's collective is out of range";
    else if ((unsigned)req->dtype >= MSCCLRT_DTYPE_COUNT) w = "the request's data type is out of range";
    else if (algo_fits(algo, req, &w)) w = NULL;
    else if (!w) w = "does not fit";
    if (why) *why = w;
    return w == NULL;
}

MSCCLRT_API mscclrt_result mscclrt_select_among(const mscclrt_request *req,
                                                const mscclrt_algo *const *cand, int n,
                                                mscclrt_choice *choice) {
    if (!req || !choice || n < 0 || (n > 0 && !cand))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_select_among: %s",
                       !req ? "req is NULL" : !choice ? "choice is NULL"
                       : n < 0 ? "n is negative" : "cand is NULL with n > 0");
    for (int i = 0; i < n; i++)
        if (!algo_check(cand[i]))
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_select_among: cand[%d] is not a live "
                           "algorithm", i);
    return algo_select_from(req, cand, n, choice);
}

/* Why nothing fits: the first few algorithms of the collective and their reasons. */
static mscclrt_result none_fits(const mscclrt_request *req, const mscclrt_algo *const *reg,
                                int nreg, const AlgoSet *defs) {
    char msg[1536];
    int w = snprintf(msg, sizeof msg, "no algorithm serves %s of %" PRIu64 " bytes (%s, %s%s, "
                     "%d ranks, %d per node, sm_%d)", coll_names[req->collective],
                     req->message_bytes, mscclrt_dtype_name(req->dtype), mode_name(req),
                     req->symmetric ? ", symmetric" : "", req->world_size, req->ranks_per_node,
                     req->arch);
    int shown = 0, total = 0;
    for (int i = 0; i < nreg + (defs ? defs->n : 0); i++) {
        const mscclrt_algo *a = i < nreg ? reg[i] : defs->v[i - nreg];
        if (a->desc.collective != req->collective) continue;
        total++;
        const char *why;
        if (shown < 4 && !algo_fits(a, req, &why) && w > 0 && (size_t)w < sizeof msg) {
            w += snprintf(msg + w, sizeof msg - (size_t)w, "%s %s: %s", shown ? ";" : ":",
                          a->desc.name, why);
            shown++;
        }
    }
    if (total > shown && w > 0 && (size_t)w < sizeof msg)
        w += snprintf(msg + w, sizeof msg - (size_t)w, "%s(%d algorithms of this collective in "
                      "all)", shown ? "; " : ": ", total);
    if (w > 0 && (size_t)w < sizeof msg)
        snprintf(msg + w, sizeof msg - (size_t)w, "%s",
                 spans_nodes_note(req, !shown && !total));
    return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "%s", msg);
}

static mscclrt_result select_or_none(mscclrt_comm *comm, const mscclrt_request *req,
                                     mscclrt_choice *choice, bool *none);

mscclrt_result algo_select(mscclrt_comm *comm, const mscclrt_request *req, mscclrt_choice *choice) {
    return select_or_none(comm, req, choice, NULL);
}

mscclrt_result algo_select_quiet(mscclrt_comm *comm, const mscclrt_request *req,
                                 mscclrt_choice *choice, bool *none) {
    *none = false;
    return select_or_none(comm, req, choice, none);
}

/* none: NULL, or where "nothing fits" goes instead of an error */
static mscclrt_result select_or_none(mscclrt_comm *comm, const mscclrt_request *req,
                                     mscclrt_choice *choice, bool *none) {
    if (!comm || comm->magic != EXEC_COMM_MAGIC)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "selection: comm is %s",
                       comm ? "not a live communicator" : "NULL");
    if (!req || !choice)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "selection: %s is NULL", req ? "choice" : "req");
    TRY(check_request(req, "selection"));
    const AlgoSet *defs;
    TRY(algo_default_set(comm, &defs));
    /* a snapshot of the registered algorithms of this collective, retained so that another
     * thread's unregister cannot free them under the selector */
    const mscclrt_algo *stack_reg[32], **reg = stack_reg;
    pthread_mutex_lock(&reg_mu);
    int nreg = reg_ordered(req->collective, NULL, 0, false);
    if (nreg > 32 && !(reg = malloc((size_t)nreg * sizeof *reg))) {
        pthread_mutex_unlock(&reg_mu);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "selection: out of memory");
    }
    reg_ordered(req->collective, reg, nreg, true);
    pthread_mutex_unlock(&reg_mu);
    const mscclrt_algo *stack_cand[64], **cand = stack_cand;
    mscclrt_result res = MSCCLRT_SUCCESS;
    /* across nodes, a rooted call for root k > 0 also gets the collection's root-0 programs
     * made for root k */
    mscclrt_algo *const *rooted = NULL;
    int nrooted = 0;
    if (algo_rooted_serves(req)) res = algo_rooted_candidates(comm, defs, req, &rooted, &nrooted);
    if (res != MSCCLRT_SUCCESS) goto out;
    int total = nreg + defs->n + nrooted, n = 0;
    if (total > 64 && !(cand = malloc((size_t)total * sizeof *cand))) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "selection: out of memory");
        goto out;
    }
    for (int i = 0; i < total; i++) {
        const mscclrt_algo *a = i < nreg               ? reg[i]
                                : i < nreg + defs->n ? defs->v[i - nreg]
                                                     : rooted[i - nreg - defs->n];
        if (algo_fits(a, req, NULL)) cand[n++] = a;
    }
    if (n)
        res = algo_select_from(req, cand, n, choice);
    else if (none)
        *none = true, res = MSCCLRT_ERR_UNAVAILABLE;
    else
        res = none_fits(req, reg, nreg, defs);
    if (res == MSCCLRT_SUCCESS)
        LOG_TRACE(LOG_SUB_EXEC, "rank %d: %s of %" PRIu64 " bytes: '%s' (%d blocks, %d threads; "
                  "%d candidates)", comm->rank, coll_names[req->collective], req->message_bytes,
                  choice->algo->desc.name, choice->blocks, choice->threads, n);
out:
    for (int i = 0; i < nreg; i++) algo_release(reg[i]);
    if (reg != stack_reg) free(reg);
    if (cand != stack_cand) free(cand);
    return res;
}
