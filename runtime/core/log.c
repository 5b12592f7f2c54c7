/*
 * log.c - the logger behind log.h. Configuration is read once from the environment (through
 * params.def) on first use; output is line-buffered and serialised with a mutex.
 */
#include "core/log.h"
#include "core/param.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = LOG_LEVEL_NONE;
static int log_mask = LOG_SUB_ALL;
static FILE *log_file;
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
    log_file = stderr;
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
        FILE *f = fopen(name, "a");
        if (f) log_file = f;
    }
}

int log_enabled(int level, int subsys) {
    pthread_once(&log_once, log_setup);
    return level <= log_level && (subsys == 0 || (subsys & log_mask));
}

void log_msg(int level, int subsys, const char *file, int line, const char *fmt, ...) {
    if (!log_enabled(level, subsys)) return;
    const char *lvname = level == LOG_LEVEL_WARN ? "WARN" : level == LOG_LEVEL_INFO ? "INFO" : "TRACE";
    const char *sname = "";
    for (unsigned i = 0; i < sizeof sub_names / sizeof *sub_names; i++)
        if (subsys & (1 << i)) { sname = sub_names[i]; break; }
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    if (level == LOG_LEVEL_WARN)
        fprintf(log_file, "%s:%d:%ld mscclrt WARN %s:%d %s\n", log_host, (int)getpid(),
                (long)syscall(SYS_gettid), file, line, msg);
    else
        fprintf(log_file, "%s:%d:%ld mscclrt %s %s %s\n", log_host, (int)getpid(),
                (long)syscall(SYS_gettid), lvname, sname, msg);
    fflush(log_file);
    pthread_mutex_unlock(&log_lock);
}
