/*
 * log.h - NCCL-style logging: MSCCLRT_DEBUG=NONE|WARN|INFO|TRACE gates the level,
 * MSCCLRT_DEBUG_SUBSYS=INIT,PLAN,... the subsystems, MSCCLRT_DEBUG_FILE the destination
 * (%h host, %p pid; appended to). Lines: "host:pid:tid mscclrt INFO PLAN message", each written
 * with one write(2), cut at 4095 bytes ("..." marks the cut).
 */
#ifndef MSCCLRT_LOG_H
#define MSCCLRT_LOG_H

enum { LOG_LEVEL_NONE, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_TRACE };
enum {
    LOG_SUB_INIT = 1 << 0, LOG_SUB_PLAN = 1 << 1, LOG_SUB_BOOT = 1 << 2, LOG_SUB_XPORT = 1 << 3,
    LOG_SUB_PROXY = 1 << 4, LOG_SUB_CG = 1 << 5, LOG_SUB_EXEC = 1 << 6, LOG_SUB_SHIM = 1 << 7,
    LOG_SUB_CPU = 1 << 8, LOG_SUB_ALLOC = 1 << 9, LOG_SUB_ALL = 0x3ff
};

void log_msg(int level, int subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int log_enabled(int level, int subsys);

#define LOG_WARN(...) log_msg(LOG_LEVEL_WARN, 0, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_INFO(sub, ...) \
    do { if (log_enabled(LOG_LEVEL_INFO, sub)) log_msg(LOG_LEVEL_INFO, sub, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define LOG_TRACE(sub, ...) \
    do { if (log_enabled(LOG_LEVEL_TRACE, sub)) log_msg(LOG_LEVEL_TRACE, sub, __FILE__, __LINE__, __VA_ARGS__); } while (0)

#endif
