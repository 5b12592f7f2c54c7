/*
 * plan_write.c - serialise the plan model (plan.h) to MSCCL++ JSON, in the key order of the
 * MSCCL++ Python DSL (spec §2.1, §2.2, §2.5, §8.10), so mscclc's plans diff cleanly against
 * DSL-generated ones. A small streaming emitter instead of cJSON: it gives Python's
 * json.dumps(indent=2) layout and prints 64-bit integers exactly (cJSON goes through double).
 */
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_MAX_DEPTH 32

/* Output buffer plus the layout state of the JSON being written. */
typedef struct {
    char *buf;                  /* owned until handed to the caller */
    size_t len, cap;
    bool oom;                   /* an allocation failed: the result is discarded */
    bool count;                 /* only count the bytes into len (buf stays NULL) */
    bool compact;               /* "," and ":" without spaces or newlines */
    int depth;                  /* open containers */
    bool first[OUT_MAX_DEPTH];  /* no member written yet in the container at this depth */
    bool after_key;             /* a key was written: the next value follows it directly */
} Out;

static void out_bytes(Out *o, const char *s, size_t n) {
    if (o->oom) return;
    if (o->count) {
        o->len += n;
        return;
    }
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (o->len + n + 1 > cap) cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->oom = true;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void out_str(Out *o, const char *s) { out_bytes(o, s, strlen(s)); }

static void out_fmt(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_fmt(Out *o, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) out_bytes(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Newline + indentation (2 spaces per level) unless compact. */
static void out_newline(Out *o, int depth) {
    if (o->compact) return;
    if (o->count) {
        o->len += 1 + 2 * (size_t)depth;
        return;
    }
    out_bytes(o, "\n", 1);
    for (int i = 0; i < depth; i++) out_bytes(o, "  ", 2);
}

/* Separator before a member of the current container (or nothing right after a key). */
static void out_sep(Out *o) {
    if (o->after_key) {
        o->after_key = false;
        return;
    }
    if (o->depth == 0) return;
    if (!o->first[o->depth]) out_bytes(o, ",", 1);
    o->first[o->depth] = false;
    out_newline(o, o->depth);
}

static void out_open(Out *o, char c) {
    out_sep(o);
    out_bytes(o, &c, 1);
    if (o->depth + 1 >= OUT_MAX_DEPTH) { /* the plan model never nests this deep */
        o->oom = true;
        return;
    }
    o->first[++o->depth] = true;
}

static void out_close(Out *o, char c) {
    if (o->oom) return;
    bool empty = o->first[o->depth];
    o->depth--;
    if (!empty) out_newline(o, o->depth);
    out_bytes(o, &c, 1);
}

static void out_string_lit(Out *o, const char *s) {
    if (o->count) {   /* the quotes, and 2 bytes per escape (\" \\ \n ...) or 6 (\u00XX) */
        size_t n = 2;
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
            n += *p == '"' || *p == '\\' || *p == '\n' || *p == '\r' || *p == '\t' || *p == '\b' ||
                         *p == '\f' ? 2 : *p < 0x20 ? 6 : 1;
        o->len += n;
        return;
    }
    out_bytes(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': out_str(o, "\\\""); break;
        case '\\': out_str(o, "\\\\"); break;
        case '\n': out_str(o, "\\n"); break;
        case '\r': out_str(o, "\\r"); break;
        case '\t': out_str(o, "\\t"); break;
        case '\b': out_str(o, "\\b"); break;
        case '\f': out_str(o, "\\f"); break;
        default:
            if (*p < 0x20) out_fmt(o, "\\u%04x", *p);
            else out_bytes(o, (const char *)p, 1);
        }
    }
    out_bytes(o, "\"", 1);
}

static void out_key(Out *o, const char *k) {
    out_sep(o);
    out_string_lit(o, k);
    out_str(o, o->compact ? ":" : ": ");
    o->after_key = true;
}

static void val_str(Out *o, const char *s) { out_sep(o); out_string_lit(o, s); }
static void val_bool(Out *o, bool b) { out_sep(o); out_str(o, b ? "true" : "false"); }
static size_t digits(uint64_t v) {
    size_t n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

/* Numbers: counting them needs no formatting (the size of a whole plan is counted often). */
static void val_int(Out *o, long long v) {
    out_sep(o);
    if (o->count) o->len += v < 0 ? 1 + digits(0 - (uint64_t)v) : digits((uint64_t)v);
    else out_fmt(o, "%lld", v);
}

static void val_u64(Out *o, uint64_t v) {
    out_sep(o);
    if (o->count) o->len += digits(v);
    else out_fmt(o, "%" PRIu64, v);
}

static void kv_str(Out *o, const char *k, const char *s) { out_key(o, k); val_str(o, s); }
static void kv_bool(Out *o, const char *k, bool b) { out_key(o, k); val_bool(o, b); }
static void kv_int(Out *o, const char *k, long long v) { out_key(o, k); val_int(o, v); }
static void kv_u64(Out *o, const char *k, uint64_t v) { out_key(o, k); val_u64(o, v); }

static void kv_int_array(Out *o, const char *k, const int *v, int n) {
    out_key(o, k);
    out_open(o, '[');
    for (int i = 0; i < n; i++) val_int(o, v[i]);
    out_close(o, ']');
}

/* One src_buff/dst_buff entry (spec §2.6): {rank?, type|buffer_id|switch_channel_id, index, size}. */
static void write_ref(Out *o, const PlanRef *r) {
    out_open(o, '{');
    if (r->rank >= 0) kv_int(o, "rank", r->rank);
    switch (r->kind) {
    case PLAN_REF_LOCAL: kv_str(o, "type", plan_buf_name(r->type)); break;
    case PLAN_REF_REMOTE: kv_int(o, "buffer_id", r->id); break;
    case PLAN_REF_SWITCH: kv_int(o, "switch_channel_id", r->id); break;
    }
    kv_u64(o, "index", r->index);
    kv_u64(o, "size", r->size);
    out_close(o, '}');
}

static void write_refs(Out *o, const char *k, const PlanRef *refs, int n) {
    out_key(o, k);
    out_open(o, '[');
    for (int i = 0; i < n; i++) write_ref(o, &refs[i]);
    out_close(o, ']');
}

/* One op, keys in the DSL's order (§8.10); absent fields are omitted as the DSL does. */
static void write_op(Out *o, const PlanOp *op) {
    out_open(o, '{');
    kv_str(o, "name", plan_op_name(op->kind));
    if (op->kind == PLAN_OP_BARRIER) {
        kv_int(o, "barrier_id", op->barrier_id);
        kv_int(o, "num_threadblocks", op->num_threadblocks);
    }
    if (op->kind == PLAN_OP_SEM_ACQUIRE || op->kind == PLAN_OP_SEM_RELEASE || op->nsem > 0)
        kv_int_array(o, "semaphore_ids", op->sem_ids, op->nsem);
    if (op->kind == PLAN_OP_PIPELINE) {
        out_key(o, "iter_context");
        out_open(o, '{');
        kv_u64(o, "unit_size", op->unit_size);
        kv_u64(o, "num_chunks", op->num_chunks);
        out_close(o, '}');
        out_key(o, "ops");
        out_open(o, '[');
        for (int i = 0; i < op->ninner; i++) write_op(o, &op->inner[i]);
        out_close(o, ']');
    }
    if (op->nsrc > 0) write_refs(o, "src_buff", op->src, op->nsrc);
    if (op->ndst > 0) write_refs(o, "dst_buff", op->dst, op->ndst);
    if (op->nchan > 0) kv_int_array(o, "channel_ids", op->chan_ids, op->nchan);
    if (op->chan_type != PLAN_CHAN_NONE) kv_str(o, "channel_type", plan_chan_name(op->chan_type));
    if (op->reduce_op != PLAN_RED_NONE) kv_str(o, "reduce_op", plan_redop_name(op->reduce_op));
    if (op->tbg_size > 0) {
        out_key(o, "tbg_info");
        out_open(o, '{');
        kv_int(o, "tb_id", op->tbg_id);
        kv_int(o, "tbg_size", op->tbg_size);
        out_close(o, '}');
    }
    out_close(o, '}');
}

static void write_tb(Out *o, const PlanTb *tb) {
    out_open(o, '{');
    kv_int(o, "id", tb->id);
    out_key(o, "ops");
    out_open(o, '[');
    for (int i = 0; i < tb->nops; i++) write_op(o, &tb->ops[i]);
    out_close(o, ']');
    out_key(o, "channels");
    out_open(o, '[');
    for (int t = 0; t < PLAN_CHAN_TYPES; t++) {
        if (tb->nchan[t] == 0) continue;
        out_open(o, '{');
        kv_str(o, "channel_type", plan_chan_name((PlanChanType)t));
        kv_int_array(o, "channel_ids", tb->chan[t], tb->nchan[t]);
        out_close(o, '}');
    }
    out_close(o, ']');
    out_key(o, "remote_buffer_refs");
    out_open(o, '[');
    for (int t = 0; t < PLAN_REMOTE_TYPES; t++) {
        if (tb->nremote[t] == 0) continue;
        out_open(o, '{');
        kv_str(o, "access_channel_type", plan_chan_name((PlanChanType)t));
        kv_int_array(o, "remote_buffer_ids", tb->remote[t], tb->nremote[t]);
        out_close(o, '}');
    }
    out_close(o, ']');
    out_close(o, '}');
}

static void write_gpu(Out *o, const PlanGpu *g) {
    out_open(o, '{');
    kv_int(o, "id", g->id);
    kv_u64(o, "input_chunks", g->input_chunks);
    kv_u64(o, "output_chunks", g->output_chunks);
    kv_u64(o, "scratch_chunks", g->scratch_chunks);
    out_key(o, "threadblocks");
    out_open(o, '[');
    for (int t = 0; t < g->ntbs; t++) write_tb(o, &g->tbs[t]);
    out_close(o, ']');

    /* memory and port peers as one entry each, then one entry per switch channel (§2.3) */
    out_key(o, "channels");
    out_open(o, '[');
    for (int t = 0; t < 2; t++) {
        if (g->npeers[t] == 0) continue;
        out_open(o, '{');
        kv_str(o, "channel_type", plan_chan_name((PlanChanType)t));
        kv_int_array(o, "connected_to", g->peers[t], g->npeers[t]);
        out_close(o, '}');
    }
    for (int s = 0; s < g->nswitch; s++) {
        const PlanSwitch *sw = &g->switches[s];
        out_open(o, '{');
        kv_str(o, "channel_type", "switch");
        kv_str(o, "buffer_type", plan_buf_name(sw->buf));
        out_key(o, "rank_groups");
        out_open(o, '[');
        out_open(o, '{');
        kv_int(o, "size", sw->nranks);
        kv_int_array(o, "ranks", sw->ranks, sw->nranks);
        out_close(o, '}');
        out_close(o, ']');
        out_close(o, '}');
    }
    out_close(o, ']');

    out_key(o, "remote_buffers");
    out_open(o, '[');
    for (int b = 0; b < g->nremotes; b++) {
        const PlanRemote *r = &g->remotes[b];
        out_open(o, '{');
        kv_int(o, "rank", r->rank);
        kv_str(o, "type", plan_buf_name(r->type));
        out_key(o, "access_channel_types");
        out_open(o, '[');
        for (int t = 0; t < PLAN_REMOTE_TYPES; t++)
            if (r->access[t]) val_str(o, plan_chan_name((PlanChanType)t));
        out_close(o, ']');
        out_close(o, '}');
    }
    out_close(o, ']');

    out_key(o, "semaphores");
    out_open(o, '[');
    for (int s = 0; s < g->nsems; s++) {
        out_open(o, '{');
        kv_int(o, "init_value", g->sem_init[s]);
        out_close(o, '}');
    }
    out_close(o, ']');
    out_close(o, '}');
}

static void write_plan(Out *o, const Plan *p, const char *producer);

char *plan_to_json(const Plan *p, bool compact, const char *producer) {
    Out o = {.compact = compact};
    write_plan(&o, p, producer);
    if (o.oom) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}

size_t plan_json_size(const Plan *p, bool compact, const char *producer) {
    Out o = {.compact = compact, .count = true};
    write_plan(&o, p, producer);
    return o.len;
}

/* Depth of a thread block's top-level ops in the document: {gpus[{threadblocks[{ops[ */
#define OP_DEPTH 6

size_t plan_json_op_size(const PlanOp *op, bool compact) {
    Out o = {.compact = compact, .count = true, .depth = OP_DEPTH};
    o.first[OP_DEPTH] = false;   /* as a later op of the list: separator and indentation */
    write_op(&o, op);
    return o.len;
}

static void write_plan(Out *o, const Plan *p, const char *producer) {
    out_open(o, '{');
    kv_str(o, "name", p->name);
    kv_str(o, "collective", p->collective_name ? p->collective_name
                                                : plan_coll_name(p->collective));
    kv_str(o, "protocol", p->protocol_ll ? "LL" : "Simple");
    kv_bool(o, "inplace", p->inplace);
    kv_bool(o, "reuse_resources", p->reuse_resources);
    out_key(o, "gpus");
    out_open(o, '[');
    for (int r = 0; r < p->ngpus; r++) write_gpu(o, &p->gpus[r]);
    out_close(o, ']');
    kv_int(o, "num_threads_per_block", p->threads);
    kv_bool(o, "use_double_scratch_buffer", p->double_scratch);
    kv_u64(o, "buffer_alignment", p->alignment);
    kv_u64(o, "min_message_size", p->min_size);
    kv_u64(o, "max_message_size", p->max_size);
    if (p->ntags > 0) {
        out_key(o, "tags");
        out_open(o, '[');
        for (int i = 0; i < p->ntags; i++) val_str(o, p->tags[i]);
        out_close(o, ']');
    }
    if (p->target != PLAN_TARGET_NONE) kv_str(o, "target", plan_target_name(p->target));
    if (producer) kv_str(o, "producer", producer);
    out_close(o, '}');
}

static void werr(PlanErr *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void werr(PlanErr *err, const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}

/* write(2) until done; false with errno set (0 for a zero-length write). */
static bool write_all(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = 0;
            return false;
        }
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* Writes the text into a new temporary file next to `path` (same directory, so rename is atomic)
 * with permission bits `mode`, then renames it over `path`. */
static bool write_replace(const char *path, const char *shown, const char *text, size_t n,
                          mode_t mode, PlanErr *err) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        werr(err, "%s: out of memory", shown);
        return false;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        const char *slash = strrchr(path, '/');
        if (slash)
            werr(err, "%s: cannot create temporary file in '%.*s': %s", shown, (int)(slash - path),
                 path, strerror(e));
        else
            werr(err, "%s: cannot create temporary file in the current directory: %s", shown, strerror(e));
        free(tmp);
        return false;
    }
    (void)fchmod(fd, mode);  /* mkstemp makes 0600; a plan is an ordinary readable file */
    const char *what = "write";
    bool ok = write_all(fd, text, n) && write_all(fd, "\n", 1);
    int saved = errno;
    if (ok && fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
        ok = false;
        what = "fsync";
        saved = errno;
    }
    if (close(fd) != 0 && ok) {
        ok = false;
        what = "close";
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        what = "rename";
        saved = errno;
    }
    if (!ok) {
        werr(err, "%s: %s failed: %s", shown, what, saved ? strerror(saved) : "short write");
        unlink(tmp);
    }
    free(tmp);
    return ok;
}

/* Writes the text straight into an existing character device or FIFO (or an open descriptor's
 * file), without creating, truncating or renaming anything. */
static bool write_straight(const char *path, const char *text, size_t n, PlanErr *err) {
    int fd = open(path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        werr(err, "%s: cannot open: %s", path, strerror(errno));
        return false;
    }
    bool ok = write_all(fd, text, n) && write_all(fd, "\n", 1);
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) werr(err, "%s: write failed: %s", path, saved ? strerror(saved) : "short write");
    return ok;
}

/* Names of an already open descriptor: written straight whatever file they lead to (replacing
 * the file behind `-o /dev/stdout` would also drop what the shell appended to it). */
static bool names_descriptor(const char *path) {
    return strcmp(path, "/dev/stdout") == 0 || strcmp(path, "/dev/stderr") == 0 ||
           strncmp(path, "/dev/fd/", 8) == 0 || strncmp(path, "/proc/self/fd/", 14) == 0;
}

/* The kernel's protected_symlinks rule for a link at path: in a sticky, world-writable directory
 * (/tmp), a link is followed only when it belongs to this user or to the directory's owner.
 * Applied here by hand because a link's target is resolved with realpath and replaced with
 * rename, which the kernel's own check (made in open) never sees: anyone could plant
 * /tmp/plan.json -> ~/.bashrc and have `mscclc -o /tmp/plan.json` replace the target. False,
 * with the message in err, for a link not to follow. */
static bool link_may_be_followed(const char *path, const struct stat *lst, PlanErr *err) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    struct stat dst;
    bool ok = true;
    if (!dir) {
        werr(err, "%s: out of memory", path);
        return false;
    }
    if (stat(dir, &dst) == 0 && (dst.st_mode & S_ISVTX) && (dst.st_mode & S_IWOTH) &&
        lst->st_uid != geteuid() && lst->st_uid != dst.st_uid) {
        werr(err, "%s: a symbolic link owned by uid %ld in the shared sticky directory '%s' "
             "(owned by uid %ld): not followed, as the kernel's protected_symlinks rule; remove "
             "it or write elsewhere", path, (long)lst->st_uid, dir, (long)dst.st_uid);
        ok = false;
    }
    free(dir);
    return ok;
}

bool plan_write_file(const Plan *p, const char *path, bool compact, const char *producer,
                     PlanErr *err) {
    char *text = plan_to_json(p, compact, producer);
    if (!text) {
        werr(err, "%s: out of memory while serialising the plan", path);
        return false;
    }
    size_t n = strlen(text);
    bool ok = false;
    struct stat lst, st;
    if (lstat(path, &lst) != 0) {
        if (errno == ENOENT) ok = write_replace(path, path, text, n, 0644, err);
        else werr(err, "%s: cannot stat: %s", path, strerror(errno));
    } else if (names_descriptor(path)) {
        ok = write_straight(path, text, n, err);
    } else if (S_ISREG(lst.st_mode)) {
        ok = write_replace(path, path, text, n, lst.st_mode & 07777, err);
    } else if (S_ISLNK(lst.st_mode)) {
        /* through the link to its target: a regular target is replaced in its own directory,
         * so the link stays a link to the new plan; not a link planted by another user */
        if (!link_may_be_followed(path, &lst, err)) {
            ok = false;
        } else if (stat(path, &st) != 0) {
            werr(err, "%s: a symbolic link to a file that cannot be reached: %s", path, strerror(errno));
        } else if (S_ISREG(st.st_mode)) {
            char *real = realpath(path, NULL);
            if (!real) werr(err, "%s: cannot resolve the symbolic link: %s", path, strerror(errno));
            else ok = write_replace(real, path, text, n, st.st_mode & 07777, err);
            free(real);
        } else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
            ok = write_straight(path, text, n, err);
        } else {
            werr(err, "%s: a symbolic link to something that is not a regular file, character "
                 "device or FIFO", path);
        }
    } else if (S_ISCHR(lst.st_mode) || S_ISFIFO(lst.st_mode)) {
        /* never rename over a device node or a FIFO: as root, `-o /dev/null` would turn
         * /dev/null into a regular file */
        ok = write_straight(path, text, n, err);
    } else {
        werr(err, "%s: not a regular file, character device or FIFO (%s)", path,
             S_ISDIR(lst.st_mode) ? "a directory" : "cannot write a plan there");
    }
    free(text);
    return ok;
}
