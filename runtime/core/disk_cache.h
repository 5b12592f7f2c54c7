/*
 * disk_cache.h - the one on-disk cache of libmscclrt and python/mscclrt: where it lives, which
 * directories and entries may be trusted, and how entries are read and written. The kernel
 * cache (codegen/cg_compile.c), the default collection's plans (algo/algo_plan_cache.c) and the
 * Python plan cache (through mscclrt_cache_read/_write) all go through it.
 *
 * Trust, as ssh and ccache decide it: a cache directory or entry is used only when it is owned
 * by this user (the effective uid) and writable by nobody else; anything else was planted (a
 * valid plan under another program's key makes collectives return wrong results) and is
 * refused with a WARN naming the path, caching then being off for that directory (a call never
 * fails because of its cache). The directory's last component may be a symbolic link only when
 * the link is this user's own (the kernel's protected_symlinks rule); entries are never links.
 * Entries are opened without following links and without blocking (a FIFO, /dev/zero or a
 * directory in their place is a miss), bounded in size, and a corrupt one is a miss that the
 * caller's next write replaces. Writes go to a new temporary file in the same directory and
 * are renamed over the entry, so concurrent readers never see a partial one.
 * Everything goes through the directory's file descriptor (openat, renameat): the checks apply
 * to what is used, not to a path that may change in between.
 */
#ifndef MSCCLRT_DISK_CACHE_H
#define MSCCLRT_DISK_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* An open, checked cache directory. */
typedef struct {
    int fd;            /* O_DIRECTORY descriptor, owned (dcache_close); -1: caching off */
    char path[4096];   /* for messages */
} DiskCache;

/* The cache root for a MSCCLRT_CACHE_DIR value: "none" -> "" (off); non-empty -> itself;
 * empty -> $XDG_CACHE_HOME/mscclrt (when absolute), else $HOME/.cache/mscclrt, else "". */
void dcache_root(const char *setting, char *out, size_t n);

/* Opens root/sub (sub NULL or "": root itself), creating missing directories (mode 0700), and
 * checks it (see above). false, with c->fd -1, when root is "" or the directory cannot be used:
 * a WARN names the path and the reason (untrusted), or an INFO (cannot be created). */
bool dcache_open(DiskCache *c, const char *root, const char *sub);
void dcache_close(DiskCache *c);   /* idempotent */

/* The entry name (a plain file name, no '/'), at most max bytes: a malloc'd copy with a NUL
 * after its *len bytes, or NULL on a miss (absent, not a regular file, not ours, too large,
 * unreadable; the reason at INFO, or WARN for an untrusted one). */
char *dcache_read(const DiskCache *c, const char *name, size_t max, size_t *len);

/* Replaces the entry atomically; false (logged at INFO) when it cannot: only the cache is lost. */
bool dcache_write(const DiskCache *c, const char *name, const void *data, size_t len);

/* A file at path read whole, at most max bytes, without blocking: regular files only (a FIFO,
 * a device such as /dev/zero or a directory is refused: errno set, "why" names it). Links are
 * followed (the path is the caller's own choice). malloc'd, NUL after *len bytes; NULL on
 * failure with *why a static text. */
char *dcache_read_path(const char *path, size_t max, size_t *len, const char **why);

#endif
