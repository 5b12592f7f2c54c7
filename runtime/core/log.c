/*
 * log.c - the logger behind log.h. Configuration is read once from the environment (through
 * params.def) on first use. Each line, prefix included, is formatted into one buffer and
 * handed to the kernel in a single write(2), bypassing stdio: lines of several threads or
 * processes sharing a terminal, pipe or file never mix mid-line (stdio may split a line into
 * several writes: glibc 2.37+ stages unbuffered stderr 128 bytes at a time). MSCCLRT_DEBUG_FILE
 * is opened O_APPEND, so processes that open it each on their own append whole lines too.
 */
#include "core/log.h"
#include "core/param.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
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

static const char *sub_names[] = {"INIT", "PLAN", "BOOT", "XPORT", "PROXY", "CG", "EXEC", "SHIM", "CPU"};

static void log_setup(void) {
    const char *lv = param_str(PARAM_DEBUG);
    if (strcasecmp(lv, "NONE") == 0) log_level = LOG_LEVEL_NONE;
    else if (strcasecmp(lv, "INFO") == 0) log_level = LOG_LEVEL_INFO;
    else if (strcasecmp(lv, "TRACE") == 0) log_level = LOG_LEVEL_TRACE;
    else if (strcasecmp(lv, "WARN") == 0) log_level = LOG_LEVEL_WARN;
    else log_level = LOG_LEVEL_NONE; /* as NCCL: silent unless asked */
    const char *sub = param_str(PARAM_DEBUG_SUBSYS);
    if (*sub) {
        int invert = sub[0] == '^';
        int mask = 0;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", sub + invert);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            for (unsigned i = 0; i < sizeof sub_names / sizeof *sub_names; i++)
                if (strcasecmp(t, sub_names[i]) == 0 || strcasecmp(t, "ALL") == 0) mask |= 1 << i;
        log_mask = invert ? (LOG_SUB_ALL & ~mask) : mask;
    }
    gethostname(log_host, sizeof log_host - 1);
    const char *path = param_str(PARAM_DEBUG_FILE);
    if (*path) {
        char name[512];
        size_t o = 0;
        for (const char *p = path; *p && o + 64 < sizeof name; p++) {
            if (p[0] == '%' && p[1] == 'h') { o += (size_t)snprintf(name + o, sizeof name - o, "%s", log_host); p++; }
            else if (p[0] == '%' && p[1] == 'p') { o += (size_t)snprintf(name + o, sizeof name - o, "%d", (int)getpid()); p++; }
            else name[o++] = *p;
        }
        name[o] = '\0';
        int fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) log_fd = fd;
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
    /* one write: atomic for O_APPEND files and for pipes up to PIPE_BUF; a short write (a
     * signal, a full pipe) is finished as well as possible */
    for (const char *p = buf; len;) {
        ssize_t w = write(log_fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        len -= (size_t)w;
    }
    errno = saved;
}
