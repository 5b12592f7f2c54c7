/*
 * disk_cache.c - the on-disk cache helper of disk_cache.h: directory resolution and trust
 * checks, bounded no-follow non-blocking reads, atomic writes; plus mscclrt_cache_read/_write
 * and mscclrt_read_file, the same for python/mscclrt through ctypes (one set of rules for every
 * cache of the project). Costs: linear in the entry's size; no directory is ever listed.
 */
#include "core/disk_cache.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

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

void dcache_root(const char *setting, char *out, size_t n) {
    out[0] = 0;
    if (!setting || !strcmp(setting, "none")) return;
    if (*setting) {
        snprintf(out, n, "%s", setting);
        return;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");   /* the XDG spec: relative values are ignored */
    if (xdg && xdg[0] == '/') {
        snprintf(out, n, "%s/mscclrt", xdg);
        return;
    }
    const char *home = getenv("HOME");
    if (home && *home) snprintf(out, n, "%s/.cache/mscclrt", home);
}

/* Why st (of path's directory or entry) cannot be trusted, or NULL: another owner, or group or
 * others may write it (and so replace what it holds). */
static const char *untrusted(const struct stat *st, char *buf, size_t n) {
    if (st->st_uid != geteuid()) {
        snprintf(buf, n, "owned by uid %ld, not by this user (uid %ld)", (long)st->st_uid,
                 (long)geteuid());
        return buf;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(buf, n, "writable by %s (mode %03o)",
                 (st->st_mode & S_IWOTH) ? "others" : "its group", (unsigned)(st->st_mode & 0777));
        return buf;
    }
    return NULL;
}

/* mkdir -p, mode 0700 for what it creates (the XDG spec's mode for cache directories). */
static bool mkdir_p(const char *dir) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return false;
    }
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return false;
        *s = c;
        if (!c) return true;
    }
}

/* Whether this warning was the last one given: the kernel cache opens its directory once per
 * compile, and one warning per directory and reason says it all (repeats go to INFO). */
static bool warned_before(const char *msg) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char last[4400];
    pthread_mutex_lock(&mu);
    bool seen = strcmp(last, msg) == 0;
    snprintf(last, sizeof last, "%s", msg);
    pthread_mutex_unlock(&mu);
    return seen;
}

#define DIR_WARN(...)                                                        \
    do {                                                                     \
        char m_[4400];                                                       \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                \
        if (warned_before(m_)) LOG_INFO(LOG_SUB_INIT, "%s", m_);             \
        else LOG_WARN("%s", m_);                                             \
    } while (0)

/* Checks an open directory (fd) found at path; closes fd and warns when it is not trusted. */
static int check_dir(int fd, const char *path) {
    struct stat st;
    char why[160];
    const char *bad = NULL;
    if (fstat(fd, &st) != 0) bad = strerror(errno);
    else if (!S_ISDIR(st.st_mode)) bad = "not a directory";
    else bad = untrusted(&st, why, sizeof why);
    if (!bad) return fd;
    DIR_WARN("cache directory %s is not used: %s; caching is off (make it yours with mode "
             "0700, or set MSCCLRT_CACHE_DIR)", path, bad);
    close(fd);
    return -1;
}

bool dcache_open(DiskCache *c, const char *root, const char *sub) {
    c->fd = -1;
    snprintf(c->path, sizeof c->path, "%s%s%s", root ? root : "", sub && *sub ? "/" : "",
             sub && *sub ? sub : "");
    if (!root || !*root) return false;
    if (!mkdir_p(root)) {
        LOG_INFO(LOG_SUB_INIT, "cache directory %s: cannot create it: %s; caching is off", root,
                 strerror(errno));
        return false;
    }
    /* the root may be a link only when it is this user's own: a link planted in a shared
     * directory (/tmp) by someone else is not followed */
    struct stat lst;
    if (lstat(root, &lst) == 0 && S_ISLNK(lst.st_mode) && lst.st_uid != geteuid()) {
        DIR_WARN("cache directory %s is not used: a symbolic link owned by uid %ld, not by "
                 "this user; caching is off", root, (long)lst.st_uid);
        return false;
    }
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        LOG_INFO(LOG_SUB_INIT, "cache directory %s: %s; caching is off", root, strerror(errno));
        return false;
    }
    char rootpath[4096];
    snprintf(rootpath, sizeof rootpath, "%s", root);
    if ((fd = check_dir(fd, rootpath)) < 0) return false;
    if (sub && *sub) {
        if (mkdirat(fd, sub, 0700) != 0 && errno != EEXIST) {
            LOG_INFO(LOG_SUB_INIT, "cache directory %s: cannot create it: %s; caching is off",
                     c->path, strerror(errno));
            close(fd);
            return false;
        }
        int sfd = openat(fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        struct stat sst;   /* Linux says ENOTDIR for a link under O_NOFOLLOW | O_DIRECTORY */
        bool link = sfd < 0 && fstatat(fd, sub, &sst, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISLNK(sst.st_mode);
        close(fd);
        if (sfd < 0) {
            if (link || e == ELOOP || e == ENOTDIR)
                DIR_WARN("cache directory %s is not used: %s; caching is off", c->path,
                         link || e == ELOOP ? "a symbolic link" : "not a directory");
            else
                LOG_INFO(LOG_SUB_INIT, "cache directory %s: %s; caching is off", c->path,
                         strerror(e));
            return false;
        }
        if ((fd = check_dir(sfd, c->path)) < 0) return false;
    }
    c->fd = fd;
    return true;
}

void dcache_close(DiskCache *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

/* Reads an open regular file of st->st_size bytes, refusing one that is larger than max or
 * grows while read. NULL with *why on failure. */
static char *read_fd(int fd, const struct stat *st, size_t max, size_t *len, const char **why) {
    if ((unsigned long long)st->st_size > max) {
        *why = "larger than the limit";
        errno = EFBIG;
        return NULL;
    }
    size_t n = (size_t)st->st_size, got = 0;
    char *buf = malloc(n + 2);
    if (!buf) {
        *why = "out of memory";
        return NULL;
    }
    while (got <= n) {   /* one byte beyond the size: a file that grew is not what we sized */
        ssize_t r = read(fd, buf + got, n + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            *why = strerror(errno);
            free(buf);
            return NULL;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (got != n) {
        *why = got > n ? "it grew while being read" : "shorter than its size";
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

char *dcache_read(const DiskCache *c, const char *name, size_t max, size_t *len) {
    *len = 0;
    if (c->fd < 0 || !name || !*name || strchr(name, '/')) return NULL;
    int fd = openat(c->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            LOG_INFO(LOG_SUB_INIT, "cache: ignoring %s/%s: %s", c->path, name,
                     errno == ELOOP ? "a symbolic link" : strerror(errno));
        return NULL;
    }
    struct stat st;
    char wbuf[160];
    const char *why = NULL;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        why = strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        why = "not a regular file";
    } else if ((why = untrusted(&st, wbuf, sizeof wbuf))) {
        LOG_WARN("cache: ignoring %s/%s: %s", c->path, name, why);
        why = NULL;   /* said at WARN */
    } else {
        buf = read_fd(fd, &st, max, len, &why);
    }
    if (!buf && why) LOG_INFO(LOG_SUB_INIT, "cache: ignoring %s/%s: %s", c->path, name, why);
    close(fd);
    return buf;
}

bool dcache_write(const DiskCache *c, const char *name, const void *data, size_t len) {
    static unsigned counter;
    if (c->fd < 0 || !name || !*name || strchr(name, '/')) return false;
    char tmp[96];
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(tmp, sizeof tmp, ".tmp.%ld.%u.%lx", (long)getpid(),
                 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), (unsigned long)ts.tv_nsec);
        fd = openat(c->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        LOG_INFO(LOG_SUB_INIT, "cache: cannot create a file in %s: %s", c->path, strerror(errno));
        return false;
    }
    const char *p = data;
    size_t done = 0;
    bool ok = true;
    while (ok && done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        ok = w > 0;
        if (ok) done += (size_t)w;
    }
    ok = close(fd) == 0 && ok;
    /* rename replaces whatever has the name (a corrupt file, a link, a FIFO), never through it */
    if (!ok || renameat(c->fd, tmp, c->fd, name) != 0) {
        LOG_INFO(LOG_SUB_INIT, "cache: cannot write %s/%s: %s", c->path, name, strerror(errno));
        unlinkat(c->fd, tmp, 0);
        return false;
    }
    return true;
}

char *dcache_read_path(const char *path, size_t max, size_t *len, const char **why) {
    *len = 0;
    *why = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO opens without a writer */
    if (fd < 0) {
        *why = strerror(errno);
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        *why = strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        *why = S_ISDIR(st.st_mode) ? "a directory, not a regular file"
               : S_ISFIFO(st.st_mode) ? "a FIFO, not a regular file"
               : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device, not a regular file"
               : "not a regular file";
        errno = EINVAL;
    } else {
        buf = read_fd(fd, &st, max, len, why);
    }
    int e = errno;
    close(fd);
    errno = e;
    return buf;
}

/* ---- the C API for python/mscclrt ------------------------------------------------------------ */

/* name must be a plain file name: the caller's key, hex or similar */
static mscclrt_result check_name(const char *fn, const char *name) {
    if (!name || !*name || strchr(name, '/') || name[0] == '.' || strlen(name) > 200)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: entry name '%.64s' is not a plain file name "
                       "(no '/', no leading '.', at most 200 bytes)", fn, name ? name : "(null)");
    return MSCCLRT_SUCCESS;
}

static mscclrt_result check_sub(const char *fn, const char *sub) {
    if (sub && (strchr(sub, '/') || sub[0] == '.' || strlen(sub) > 64))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: subdirectory '%.64s' is not a plain name", fn,
                       sub);
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_cache_read(const char *setting, const char *sub,
                                              const char *name, size_t max, void **data,
                                              size_t *len) {
    if (!data || !len) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cache_read: data or len is NULL");
    *data = NULL;
    *len = 0;
    TRY(check_name("mscclrt_cache_read", name));
    TRY(check_sub("mscclrt_cache_read", sub));
    char root[PATH_MAX];
    dcache_root(setting ? setting : param_str(PARAM_CACHE_DIR), root, sizeof root);
    DiskCache c;
    if (!dcache_open(&c, root, sub)) return MSCCLRT_SUCCESS;   /* caching off: a miss */
    *data = dcache_read(&c, name, max, len);
    dcache_close(&c);
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_cache_write(const char *setting, const char *sub,
                                               const char *name, const void *data, size_t len,
                                               int *written) {
    if (written) *written = 0;
    if (!data && len) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cache_write: data is NULL");
    TRY(check_name("mscclrt_cache_write", name));
    TRY(check_sub("mscclrt_cache_write", sub));
    char root[PATH_MAX];
    dcache_root(setting ? setting : param_str(PARAM_CACHE_DIR), root, sizeof root);
    DiskCache c;
    if (!dcache_open(&c, root, sub)) return MSCCLRT_SUCCESS;
    bool ok = dcache_write(&c, name, data ? data : "", len);
    dcache_close(&c);
    if (written) *written = ok;
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_read_file(const char *path, size_t max, void **data,
                                             size_t *len) {
    if (!path || !data || !len)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_read_file: path, data or len is NULL");
    const char *why;
    *data = dcache_read_path(path, max, len, &why);
    if (*data) return MSCCLRT_SUCCESS;
    if (errno == EFBIG)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: larger than the limit of %zu bytes", path, max);
    return rt_fail(errno == ENOMEM || errno == EIO ? MSCCLRT_ERR_SYSTEM : MSCCLRT_ERR_INVALID_ARG,
                   "%s: %s", path, why ? why : "cannot read");
}

MSCCLRT_API void mscclrt_free(void *p) {
    free(p);
}
