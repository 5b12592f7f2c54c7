/*
 * test_disk_cache.c - the on-disk cache helper (runtime/core/disk_cache.c), issue 22 items 4,
 * 5 and 10: directory resolution; a directory or entry that another user owns or others may
 * write is refused with a WARN naming it (other owners only when run as root, which can chown);
 * a symbolic link, FIFO, /dev/zero link or oversized entry is a miss that never blocks and that
 * the next write replaces; writes are atomic and leave no temporary file; bounded reads of
 * paths refuse FIFOs, devices and directories; and through the default collection, a valid
 * plan planted under another plan's key in an untrusted directory is never used.
 */
#include "../harness.h"

#include "algo/algo.h"
#include "core/disk_cache.h"
#include "mscclrt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char logfile[] = "/tmp/test_disk_cache_log_XXXXXX";

/* Whether the log (MSCCLRT_DEBUG_FILE) has gained a WARN line containing s since *off. */
static bool warned(const char *s, long *off) {
    FILE *f = fopen(logfile, "r");
    bool hit = false;
    char line[8192];
    if (!f) return false;
    fseek(f, *off, SEEK_SET);
    while (fgets(line, sizeof line, f))
        if (strstr(line, "WARN") && strstr(line, s)) hit = true;
    *off = ftell(f);
    fclose(f);
    return hit;
}

static void put(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK_EQ_INT((long long)strlen(text), write(fd, text, strlen(text)));
    close(fd);
    chmod(path, mode);   /* whatever the umask */
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void rm_rf(const char *p) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    CHECK_EQ_INT(0, system(cmd));
}

static void t_root(void) {
    char out[4096];
    dcache_root("none", out, sizeof out);
    CHECK_STR("", out);
    dcache_root("/x/y", out, sizeof out);
    CHECK_STR("/x/y", out);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    dcache_root("", out, sizeof out);
    CHECK_STR("/xdg/mscclrt", out);
    setenv("XDG_CACHE_HOME", "relative", 1);   /* the XDG spec: ignored */
    dcache_root("", out, sizeof out);
    CHECK_STR("/home/u/.cache/mscclrt", out);
    unsetenv("XDG_CACHE_HOME");
    dcache_root(NULL, out, sizeof out);
    CHECK_STR("", out);
}

/* reads, writes, and every kind of bad entry in a trusted directory */
static void t_entries(void) {
    char root[] = "/tmp/test_disk_cache_XXXXXX", p[4200];
    CHECK(mkdtemp(root) != NULL);
    DiskCache c;
    CHECK(dcache_open(&c, root, "plans"));
    snprintf(p, sizeof p, "%s/plans", root);
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0700);   /* created private */
    size_t n = 7;
    CHECK(dcache_read(&c, "a.json", 100, &n) == NULL && n == 0);   /* absent */
    CHECK(dcache_write(&c, "a.json", "{\"x\": 1}", 8));
    char *b = dcache_read(&c, "a.json", 100, &n);
    CHECK(b && n == 8 && !strcmp(b, "{\"x\": 1}"));
    free(b);
    CHECK(dcache_read(&c, "a.json", 7, &n) == NULL);               /* over the bound */
    CHECK(dcache_read(&c, "../x", 100, &n) == NULL);               /* not a plain name */
    /* a FIFO: a miss at once (no writer would ever come), and replaced by the next write */
    snprintf(p, sizeof p, "%s/plans/fifo.json", root);
    CHECK_EQ_INT(0, mkfifo(p, 0600));
    CHECK(dcache_read(&c, "fifo.json", 100, &n) == NULL);
    CHECK(dcache_write(&c, "fifo.json", "{}", 2));
    CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode));
    /* a link to /dev/zero: never followed (it would read until memory runs out) */
    snprintf(p, sizeof p, "%s/plans/zero.json", root);
    CHECK_EQ_INT(0, symlink("/dev/zero", p));
    CHECK(dcache_read(&c, "zero.json", 1 << 30, &n) == NULL);
    CHECK(dcache_write(&c, "zero.json", "{}", 2));
    CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode));
    /* an entry others may write: refused with a warning naming it, then rewritten private */
    long off = 0;
    warned("", &off);
    snprintf(p, sizeof p, "%s/plans/open.json", root);
    put(p, "{\"planted\": 1}", 0666);
    CHECK(dcache_read(&c, "open.json", 100, &n) == NULL);
    CHECK(warned(p, &off));
    CHECK(dcache_write(&c, "open.json", "{\"mine\": 1}", 11));
    CHECK(stat(p, &st) == 0 && !(st.st_mode & 022));
    b = dcache_read(&c, "open.json", 100, &n);
    CHECK(b && !strcmp(b, "{\"mine\": 1}"));
    free(b);
    /* an entry of another user (only root can make one) */
    if (geteuid() == 0) {
        snprintf(p, sizeof p, "%s/plans/other.json", root);
        put(p, "{}", 0644);
        CHECK_EQ_INT(0, chown(p, 12345, 12345));
        CHECK(dcache_read(&c, "other.json", 100, &n) == NULL);
        CHECK(warned("owned by uid 12345", &off));
    }
    /* a directory in an entry's place: a miss; the write fails without harm */
    snprintf(p, sizeof p, "%s/plans/dir.json", root);
    CHECK_EQ_INT(0, mkdir(p, 0700));
    CHECK(dcache_read(&c, "dir.json", 100, &n) == NULL);
    CHECK(!dcache_write(&c, "dir.json", "{}", 2));
    /* no temporary file is left behind */
    snprintf(p, sizeof p, "%s/plans", root);
    CHECK_EQ_INT(geteuid() == 0 ? 6 : 5, count_entries(p));
    dcache_close(&c);
    dcache_close(&c);
    rm_rf(root);
}

/* directories: group- or world-writable, another's, a link planted by another user */
static void t_dirs(void) {
    char root[] = "/tmp/test_disk_cache_XXXXXX", p[4200];
    CHECK(mkdtemp(root) != NULL);
    long off = 0;
    warned("", &off);
    DiskCache c;
    CHECK(!dcache_open(&c, "", "plans") && c.fd < 0);            /* off */
    /* the root writable by its group */
    chmod(root, 0770);
    CHECK(!dcache_open(&c, root, "plans") && c.fd < 0);
    CHECK(warned(root, &off));
    chmod(root, 0700);
    /* the plans directory writable by others */
    snprintf(p, sizeof p, "%s/plans", root);
    CHECK_EQ_INT(0, mkdir(p, 0700));
    chmod(p, 0777);
    CHECK(!dcache_open(&c, root, "plans"));
    CHECK(warned("writable by others", &off));
    chmod(p, 0700);
    CHECK(dcache_open(&c, root, "plans"));
    dcache_close(&c);
    /* plans as a link: refused (whoever made it; the root is where links may be the user's) */
    rm_rf(p);
    char target[4200];
    snprintf(target, sizeof target, "%s/elsewhere", root);
    CHECK_EQ_INT(0, mkdir(target, 0700));
    CHECK_EQ_INT(0, symlink(target, p));
    CHECK(!dcache_open(&c, root, "plans"));
    CHECK(warned("a symbolic link", &off));
    /* a shared sticky directory as the root (as /tmp): not ours unless we are root */
    if (geteuid() != 0) {
        CHECK(!dcache_open(&c, "/tmp", NULL));
        CHECK(warned("/tmp", &off));
    } else {
        /* root can play the other user: their directory, their link to our directory */
        char theirs[4200], link[4200];
        snprintf(theirs, sizeof theirs, "%s/theirs", root);
        CHECK_EQ_INT(0, mkdir(theirs, 0700));
        CHECK_EQ_INT(0, chown(theirs, 12345, 12345));
        CHECK(!dcache_open(&c, theirs, NULL));
        CHECK(warned("owned by uid 12345", &off));
        snprintf(link, sizeof link, "%s/link", root);
        CHECK_EQ_INT(0, symlink(target, link));
        CHECK(dcache_open(&c, link, NULL));                    /* our own link: followed */
        dcache_close(&c);
        CHECK_EQ_INT(0, lchown(link, 12345, 12345));
        CHECK(!dcache_open(&c, link, NULL));                   /* theirs: not */
        CHECK(warned("a symbolic link owned by uid 12345", &off));
    }
    rm_rf(root);
}

static void t_read_path(void) {
    char dir[] = "/tmp/test_disk_cache_XXXXXX", p[4200];
    CHECK(mkdtemp(dir) != NULL);
    size_t n;
    const char *why;
    CHECK(dcache_read_path("/dev/zero", 1 << 20, &n, &why) == NULL);
    CHECK(why && strstr(why, "device"));
    CHECK(dcache_read_path(dir, 1 << 20, &n, &why) == NULL);
    CHECK(why && strstr(why, "directory"));
    snprintf(p, sizeof p, "%s/fifo", dir);
    CHECK_EQ_INT(0, mkfifo(p, 0600));
    CHECK(dcache_read_path(p, 1 << 20, &n, &why) == NULL);     /* returns at once */
    CHECK(why && strstr(why, "FIFO"));
    snprintf(p, sizeof p, "%s/f", dir);
    put(p, "hello", 0600);
    char *b = dcache_read_path(p, 5, &n, &why);
    CHECK(b && n == 5 && !strcmp(b, "hello"));
    free(b);
    CHECK(dcache_read_path(p, 4, &n, &why) == NULL);
    /* the public form */
    void *d = NULL;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_read_file("/dev/zero", 1 << 20, &d, &n));
    CHECK_CONTAINS(mscclrt_last_error(), "/dev/zero: a device, not a regular file");
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_read_file(p, 100, &d, &n));
    CHECK(d && n == 5);
    mscclrt_free(d);
    /* and the public cache calls, with an explicit setting */
    int w = 0;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cache_write(dir, "plans", "k.json", "{}", 2, &w));
    CHECK_EQ_INT(1, w);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cache_read(dir, "plans", "k.json", 100, &d, &n));
    CHECK(d && n == 2);
    mscclrt_free(d);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_cache_read(dir, "plans", "../k", 100, &d, &n));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cache_read("none", "plans", "k.json", 100, &d, &n));
    CHECK(d == NULL);
    rm_rf(dir);
}

/* algo_default_build_plans(2 ranks) over root in a forked child, so that no plan comes from
 * this process's memory cache (the parent never builds): compiled and cached counts. */
static bool build(const char *root, AlgoBuildStats *st) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_t pid = fork();
    if (pid == 0) {
        AlgoBuildStats s = {0};
        AlgoSet *set = calloc(1, sizeof *set);
        int ok = algo_default_build_plans(2, 2, 90, root, set, &s) == MSCCLRT_SUCCESS;
        int out[3] = {ok, s.compiled, s.cached};
        _exit(write(fds[1], out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    close(fds[1]);
    int in[3] = {0, 0, 0}, status = 0;
    bool got = pid > 0 && read(fds[0], in, sizeof in) == (ssize_t)sizeof in;
    close(fds[0]);
    if (pid > 0) waitpid(pid, &status, 0);
    st->compiled = in[1];
    st->cached = in[2];
    return got && in[0] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The attack: another program's valid plan (here the 4-rank one) planted under the key
 * of the 8-rank plans, in a plans directory others may write; the collection must compile its
 * own plans, not read the planted ones, and say why. */
static void t_planted_plan(void) {
    char root[] = "/tmp/test_disk_cache_XXXXXX", plans[4200];
    CHECK(mkdtemp(root) != NULL);
    snprintf(plans, sizeof plans, "%s/plans", root);
    AlgoBuildStats st;
    CHECK(build(root, &st));
    CHECK(st.compiled > 1 && st.cached == 0);
    /* every entry replaced by the same text, one plan of the 2-rank collection; then opened */
    DIR *d = opendir(plans);
    char p[4800];
    char *text = NULL;
    size_t n;
    const char *why;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", plans, e->d_name);
        if (!text) {
            text = dcache_read_path(p, 1 << 24, &n, &why);   /* the first stays as it is */
        } else {
            put(p, text, 0666);
        }
    }
    if (d) closedir(d);
    CHECK(text != NULL);
    free(text);
    chmod(plans, 0777);
    long off = 0;
    warned("", &off);
    CHECK(build(root, &st));
    CHECK_EQ_INT(0, st.cached);          /* nothing read from the untrusted directory */
    CHECK(warned(plans, &off));
    /* the directory made private again: the world-writable entries are still refused (and
     * rewritten), so the next build reads only what this user wrote */
    chmod(plans, 0700);
    CHECK(build(root, &st));
    CHECK_EQ_INT(1, st.cached);          /* only the first, untouched entry */
    CHECK(warned("writable by others", &off));
    CHECK(build(root, &st));
    CHECK_EQ_INT(0, st.compiled);
    rm_rf(root);
}

int main(void) {
    int fd = mkstemp(logfile);
    if (fd >= 0) close(fd);
    setenv("MSCCLRT_DEBUG", "WARN", 1);          /* before anything logs: read once */
    setenv("MSCCLRT_DEBUG_FILE", logfile, 1);
    TEST("disk_cache/root", t_root());
    TEST("disk_cache/entries", t_entries());
    TEST("disk_cache/dirs", t_dirs());
    TEST("disk_cache/read_path", t_read_path());
    TEST("disk_cache/planted_plan", t_planted_plan());
    unlink(logfile);
    return harness_report();
}
