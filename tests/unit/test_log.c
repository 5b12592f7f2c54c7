/*
 * test_log.c - the logger under concurrency: several forked processes log many lines of many
 * lengths at once, into one MSCCLRT_DEBUG_FILE (each opens it itself) and into one shared
 * standard error whose stdio buffer is small (glibc 2.37 and later stage unbuffered output 128
 * bytes at a time, which is how lines of 8 processes came to mix mid-line). Every line must
 * arrive whole, as one write. A line longer than the logger's buffer is cut, marked with "...",
 * and still ends with a newline. A value of MSCCLRT_DEBUG, MSCCLRT_DEBUG_SUBSYS or
 * MSCCLRT_DEBUG_FILE that cannot be used is one warning naming the variable, the value and what
 * is accepted (issue 22 item 14: they failed silently), in a fresh process (this program re-run
 * with --log-once: the variables are read once per process).
 */
#include "core/log.h"
#include "../harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPROC 6
#define NLINES 1000
#define LONG_LINE 6000   /* more than the logger's line buffer */

/* Line i of child c: a payload whose length and letters depend only on (c, i). */
static size_t payload(int c, int i, char *buf, size_t cap) {
    size_t n = (size_t)(i * 37 + c * 101) % 1900 + 1;
    if (n >= cap) n = cap - 1;
    for (size_t k = 0; k < n; k++) buf[k] = (char)(k % 7 ? 'a' + (size_t)(c + i) % 26 : 'A' + k % 26);
    buf[n] = '\0';
    return n;
}

static void child(int c, int gate) {
    char b;
    (void)!read(gate, &b, 1);   /* all children start together: the parent closes the pipe */
    char text[2048];
    for (int i = 0; i < NLINES; i++) {
        payload(c, i, text, sizeof text);
        if (i % 10 == 3) log_msg(LOG_LEVEL_WARN, 0, "test_log.c", i, "child %d line %d %s", c, i, text);
        else log_msg(LOG_LEVEL_INFO, LOG_SUB_INIT, "test_log.c", i, "child %d line %d %s", c, i, text);
    }
    if (c == 0) {   /* one line longer than the buffer */
        static char big[LONG_LINE + 1];
        memset(big, 'z', LONG_LINE);
        log_msg(LOG_LEVEL_INFO, LOG_SUB_INIT, "test_log.c", 0, "child 0 long %s", big);
    }
}

/* Forks NPROC children that log; stderr_mode: they log to the shared standard error (fd 2 is
 * the file, opened without O_APPEND, with a 128-byte stdio buffer), else to MSCCLRT_DEBUG_FILE. */
static void run_children(const char *path, bool stderr_mode, pid_t *pids) {
    int gate[2];
    if (pipe(gate) != 0) return;
    int fd = -1;
    if (stderr_mode) fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    else unlink(path);
    fflush(stdout);
    fflush(stderr);
    for (int c = 0; c < NPROC; c++) {
        pids[c] = fork();
        if (pids[c] != 0) continue;
        alarm(60);
        close(gate[1]);
        setenv("MSCCLRT_DEBUG", "INFO", 1);
        unsetenv("MSCCLRT_DEBUG_SUBSYS");
        if (stderr_mode) {
            unsetenv("MSCCLRT_DEBUG_FILE");
            dup2(fd, 2);
            setvbuf(stderr, NULL, _IOFBF, 128);
        } else {
            setenv("MSCCLRT_DEBUG_FILE", path, 1);
        }
        child(c, gate[0]);
        _exit(0);
    }
    close(gate[0]);
    close(gate[1]);   /* go */
    if (fd >= 0) close(fd);
    for (int c = 0; c < NPROC; c++) {
        int st = 0;
        waitpid(pids[c], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
}

/* Every line of the file: "host:pid:tid mscclrt INFO INIT child C line I PAYLOAD" or
 * "host:pid:tid mscclrt WARN test_log.c:I child C line I PAYLOAD", pid that of child C. */
static void check_file(const char *path, const pid_t *pids) {
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    int count[NPROC] = {0}, bad = 0, longs = 0;
    size_t cap = 1 << 16;
    char *line = malloc(cap), want[2048];
    while (fgets(line, (int)cap, f)) {
        size_t len = strlen(line);
        int pid = -1, c = -1, i = -1, n = 0;
        char *m = strstr(line, " mscclrt "), *colon = strchr(line, ':');
        if (len == 0 || line[len - 1] != '\n' || !m || !colon || sscanf(colon + 1, "%d", &pid) != 1) {
            if (bad++ < 5) fprintf(stderr, "broken line: %.200s\n", line);
            continue;
        }
        line[--len] = '\0';
        if (strncmp(m, " mscclrt INFO INIT child 0 long ", 32) == 0) {
            longs++;
            CHECK_EQ_INT(4095, len);   /* cut to the buffer (4096 with the newline) */
            CHECK(len >= 3 && strcmp(line + len - 3, "...") == 0);
            CHECK_EQ_INT(pids[0], pid);
            continue;
        }
        const char *body = strstr(m, " child ");
        if (!body || sscanf(body, " child %d line %d %n", &c, &i, &n) != 2 || c < 0 || c >= NPROC ||
            i < 0 || i >= NLINES || pid != pids[c]) {
            if (bad++ < 5) fprintf(stderr, "broken line: %.200s\n", line);
            continue;
        }
        char head[64];
        if (i % 10 == 3) snprintf(head, sizeof head, " mscclrt WARN test_log.c:%d child ", i);
        else snprintf(head, sizeof head, " mscclrt INFO INIT child ");
        payload(c, i, want, sizeof want);
        if (strncmp(m, head, strlen(head)) != 0 || strcmp(body + n, want) != 0) {
            if (bad++ < 5) fprintf(stderr, "broken line: %.200s\n", line);
            continue;
        }
        count[c]++;
    }
    fclose(f);
    free(line);
    CHECK_EQ_INT(0, bad);
    CHECK_EQ_INT(1, longs);
    for (int c = 0; c < NPROC; c++) CHECK_EQ_INT(NLINES, count[c]);
}

static void test_concurrent(bool stderr_mode) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/mscclrt-test-log.%d.%s", (int)getpid(), stderr_mode ? "err" : "file");
    pid_t pids[NPROC];
    run_children(path, stderr_mode, pids);
    check_file(path, pids);
    unlink(path);
}

static char self[4096];

/* Runs this program with --log-once under env; its standard error into out. */
static void run_env(const char *env, char *out, size_t n) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "env -u MSCCLRT_DEBUG -u MSCCLRT_DEBUG_SUBSYS -u MSCCLRT_DEBUG_FILE "
             "%s '%s' --log-once 2>&1", env, self);
    FILE *p = popen(cmd, "r");
    size_t got = p ? fread(out, 1, n - 1, p) : 0;
    out[got] = 0;
    if (p) CHECK_EQ_INT(0, pclose(p));
}

static void test_bad_values(void) {
    char out[8192];
    run_env("MSCCLRT_DEBUG=VERBOSE", out, sizeof out);
    CHECK(strstr(out, "WARN MSCCLRT_DEBUG='VERBOSE' is not a level (NONE, WARN, INFO or TRACE); "
                      "using WARN") != NULL);
    CHECK(strstr(out, "a warning") != NULL);          /* WARN is on */
    CHECK(strstr(out, "an info line") == NULL);
    run_env("MSCCLRT_DEBUG=INFO MSCCLRT_DEBUG_SUBSYS=INIT,FOO", out, sizeof out);
    CHECK(strstr(out, "MSCCLRT_DEBUG_SUBSYS='INIT,FOO': unknown subsystem 'FOO' ignored "
                      "(accepted: INIT, PLAN, BOOT") != NULL);
    CHECK(strstr(out, "an info line") != NULL);       /* INIT still selected */
    run_env("MSCCLRT_DEBUG=WARN MSCCLRT_DEBUG_FILE=/nonexistent/dir/log.%p", out, sizeof out);
    CHECK(strstr(out, "MSCCLRT_DEBUG_FILE='/nonexistent/dir/log.%p': cannot open "
                      "'/nonexistent/dir/log.") != NULL);
    CHECK(strstr(out, "No such file or directory; logging to standard error") != NULL);
    CHECK(strstr(out, "a warning") != NULL);          /* on standard error instead */
    /* good values: no warning about the configuration */
    run_env("MSCCLRT_DEBUG=info MSCCLRT_DEBUG_SUBSYS=^PLAN", out, sizeof out);
    CHECK(strstr(out, "MSCCLRT_DEBUG") == NULL);
    CHECK(strstr(out, "an info line") != NULL);
    run_env("", out, sizeof out);
    CHECK_STR("", out);                                /* silent unless asked */
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--log-once")) {
        log_msg(LOG_LEVEL_WARN, 0, "test_log.c", 1, "a warning");
        log_msg(LOG_LEVEL_INFO, LOG_SUB_INIT, "test_log.c", 2, "an info line");
        return 0;
    }
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l > 0) self[l] = 0;
    alarm(120);
    TEST("log/bad_values", test_bad_values());
    TEST("log/file-concurrent", test_concurrent(false));
    TEST("log/stderr-concurrent", test_concurrent(true));
    return harness_report();
}
