/*
 * log.c - the logger behind log.h. Configuration is read once from the environment (through
 * params.def) on first use. Each line, prefix included, is formatted into one buffer and
 * handed to the kernel in a single write(2), bypassing stdio: lines of several threads or
 * processes sharing a terminal, pipe or file never mix mid-line (stdio may split a line into
 * several writes: glibc 2.37+ stages unbuffered stderr 128 bytes at a time). MSCCLRT_DEBUG_FILE
 * is opened O_APPEND, so processes that open it each on their own append whole lines too.
 * A value of MSCCLRT_DEBUG, MSCCLRT_DEBUG_SUBSYS or MSCCLRT_DEBUG_FILE that cannot be used is
 * one WARN line at setup, whatever the level (a typo in MSCCLRT_DEBUG would otherwise silence
 * the very warning about it), naming the variable, the value and what is accepted.
 */
#include "core/log.h"
#include "core/param.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The longest line written, newline included; longer ones are cut and end with "...". */
#define LOG_LINE_MAX 4096

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = LOG_LEVEL_NONE;
static int log_mask = LOG_SUB_ALL;
static int log_fd = 2;          /* standard error, or the MSCCLRT_DEBUG_FILE (never closed) */
static char log_host[64];

static const char *sub_names[] = {"INIT", "PLAN", "BOOT", "XPORT", "PROXY", "CG", "EXEC", "SHIM", "CPU", "ALLOC"};

static void write_line(const char *buf, size_t len);

/* A WARN about the logger's own configuration: written whatever the level. */
__attribute__((format(printf, 1, 2))) static void setup_warn(const char *fmt, ...) {
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s:%d:%ld mscclrt WARN ", log_host, (int)getpid(),
                     (long)syscall(SYS_gettid));
    if (n < 0 || (size_t)n >= sizeof buf) return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m < sizeof buf - (size_t)n - 1
                                              ? (size_t)m : sizeof buf - (size_t)n - 2);
    buf[len++] = '\n';
    write_line(buf, len);
}

static void log_setup(void) {
    gethostname(log_host, sizeof log_host - 1);
    const char *lv = param_str(PARAM_DEBUG);
    if (strcasecmp(lv, "NONE") == 0 || !*lv) log_level = LOG_LEVEL_NONE;
    else if (strcasecmp(lv, "INFO") == 0) log_level = LOG_LEVEL_INFO;
    else if (strcasecmp(lv, "TRACE") == 0) log_level = LOG_LEVEL_TRACE;
    else if (strcasecmp(lv, "WARN") == 0) log_level = LOG_LEVEL_WARN;
    else {   /* as NCCL: silent unless asked; but say that the ask was not understood */
        log_level = LOG_LEVEL_WARN;
        setup_warn("MSCCLRT_DEBUG='%.64s' is not a level (NONE, WARN, INFO or TRACE); using WARN",
                   lv);
    }
    const char *sub = param_str(PARAM_DEBUG_SUBSYS);
    if (*sub) {
        int invert = sub[0] == '^';
        int mask = 0;
        char buf[256];
        if (strlen(sub + invert) >= sizeof buf)
            setup_warn("MSCCLRT_DEBUG_SUBSYS is %zu bytes long: only its first %zu are read",
                       strlen(sub + invert), sizeof buf - 1);
        snprintf(buf, sizeof buf, "%s", sub + invert);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int bit = 0;
            for (unsigned i = 0; i < sizeof sub_names / sizeof *sub_names; i++)
                if (strcasecmp(t, sub_names[i]) == 0) bit = 1 << i;
            if (strcasecmp(t, "ALL") == 0) bit = LOG_SUB_ALL;
            if (!bit)
                setup_warn("MSCCLRT_DEBUG_SUBSYS='%.64s': unknown subsystem '%.32s' ignored "
                           "(accepted: INIT, PLAN, BOOT, XPORT, PROXY, CG, EXEC, SHIM, CPU, ALLOC, ALL; "
                           "a leading ^ excludes)", sub, t);
            mask |= bit;
        }
        log_mask = invert ? (LOG_SUB_ALL & ~mask) : mask;
    }
    const char *path = param_str(PARAM_DEBUG_FILE);
    if (*path) {
        char name[512];
        size_t o = 0;
        bool cut = false;
        for (const char *p = path; *p; p++) {
            if (o + 64 >= sizeof name) {
                cut = true;
                break;
            }
            if (p[0] == '%' && p[1] == 'h') { o += (size_t)snprintf(name + o, sizeof name - o, "%s", log_host); p++; }
            else if (p[0] == '%' && p[1] == 'p') { o += (size_t)snprintf(name + o, sizeof name - o, "%d", (int)getpid()); p++; }
            else name[o++] = *p;
        }
        name[o] = '\0';
        int fd = cut ? -1 : open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) log_fd = fd;
        else if (cut)
            setup_warn("MSCCLRT_DEBUG_FILE='%.64s...' is longer than %zu bytes once expanded; "
                       "logging to standard error", path, sizeof name - 64);
        else
            setup_warn("MSCCLRT_DEBUG_FILE='%.200s': cannot open '%.200s' for appending: %s; "
                       "logging to standard error", path, name, strerror(errno));
    }
}

/* Writes a whole line with one write(2); a short write (a signal, a full pipe) is finished as
 * well as possible. */
static void write_line(const char *buf, size_t len) {
    for (const char *p = buf; len;) {
        ssize_t w = write(log_fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        len -= (size_t)w;
    }
}

int log_enabled(int level, int subsys) {
    pthread_once(&log_once, log_setup);
    return level <= log_level && (subsys == 0 || (subsys & log_mask));
}

void log_msg(int level, int subsys, const char *file, int line, const char *fmt, ...) {
    if (!log_enabled(level, subsys)) return;
    int saved = errno;   /* callers log between a failing call and their use of errno */
    const char *lvname = level == LOG_LEVEL_WARN ? "WARN" : level == LOG_LEVEL_INFO ? "INFO" : "TRACE";
    const char *sname = "";
    for (unsigned i = 0; i < sizeof sub_names / sizeof *sub_names; i++)
        if (subsys & (1 << i)) { sname = sub_names[i]; break; }
    char buf[LOG_LINE_MAX];
    const size_t room = sizeof buf - 1;   /* the newline always fits */
    int n = level == LOG_LEVEL_WARN
                ? snprintf(buf, room, "%s:%d:%ld mscclrt WARN %s:%d ", log_host, (int)getpid(),
                           (long)syscall(SYS_gettid), file, line)
                : snprintf(buf, room, "%s:%d:%ld mscclrt %s %s ", log_host, (int)getpid(),
                           (long)syscall(SYS_gettid), lvname, sname);
    size_t len = n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(buf + len, room - len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < room - len) {
        len += (size_t)n;
    } else if (n >= 0) {   /* cut: mark it */
        len = room;
        memcpy(buf + len - 3, "...", 3);
    }
    buf[len++] = '\n';
    /* one write: atomic for O_APPEND files and for pipes up to PIPE_BUF */
    write_line(buf, len);
    errno = saved;
}
