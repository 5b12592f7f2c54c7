/*
 * test_param.c - environment numbers: decimal only (010 is ten, not eight), range-checked
 * against params.def (never truncated: 4294967297 is not 1), and a bad value is an error of the
 * call that reads it, naming the variable and its range. The environment is read once per
 * process, so every case runs in a re-executed child with a fresh environment: params.def
 * getters, the public API (mscclrt_cpu_comm_create, the bootstrap's timeouts) and the launcher
 * variables of environment init (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_PORT).
 */
#include "bootstrap/boot_internal.h"
#include "core/err.h"
#include "core/param.h"
#include "../harness.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- the child: one probe, the answer on stdout ----------------------------------------------- */

static int child(const char *probe) {
    mscclrt_result r = MSCCLRT_ERR_INTERNAL;
    long long v = -1;
    if (strncmp(probe, "get:", 4) == 0) {
        for (int i = 0; i < PARAM_COUNT; i++)
            if (strcmp(param_env_name((ParamId)i), probe + 4) == 0) r = param_int((ParamId)i, &v);
    } else if (strcmp(probe, "cpu") == 0) {
        mscclrt_cpu_comm *c = NULL;
        r = mscclrt_cpu_comm_create(&c, 2);
        mscclrt_cpu_comm_destroy(c);
    } else if (strcmp(probe, "uid") == 0) {
        BootId id;
        r = boot_get_unique_id(&id);
    } else if (strcmp(probe, "init") == 0) {   /* timeout 0: MSCCLRT_BOOT_TIMEOUT_MS */
        BootId id;
        BootIdWire w = {.magic = BOOT_MAGIC, .version = BOOT_VERSION,
                        .root = {.family = 4, .port_be = {0, 1}, .addr = {127, 0, 0, 1}}};
        memcpy(id.bytes, &w, sizeof w);
        Boot *b = NULL;
        r = boot_init(&b, &id, 0, 2, 0);
        boot_close(b);
    } else if (strcmp(probe, "env") == 0) {
        Boot *b = NULL;
        r = boot_init_env(&b);
        boot_close(b);
    }
    printf("%d %lld %s\n", (int)r, v, mscclrt_last_error());
    return 0;
}

/* ---- the parent -------------------------------------------------------------------------------- */

typedef struct { int rc; long long val; char err[1024]; } Answer;

/* Runs probe in a child whose environment has none of the variables under test but the
 * NAME=VALUE strings of env (NULL-terminated). */
static Answer ask(const char *probe, const char *const *env) {
    Answer a = {.rc = -1, .val = -1, .err = ""};
    int p[2];
    if (pipe(p) != 0) return a;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        dup2(p[1], 1);
        close(p[0]);
        static const char *const clear[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
            "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL};
        for (int i = 0; clear[i]; i++) unsetenv(clear[i]);
        for (int i = 0; i < PARAM_COUNT; i++) unsetenv(param_env_name((ParamId)i));
        setenv("MSCCLRT_SOCKET_IFNAME", "lo", 1);
        for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
        char self[] = "test_param", flag[] = "--child", *argv[] = {self, flag, (char *)probe, NULL};
        execve("/proc/self/exe", argv, environ);
        _exit(127);
    }
    close(p[1]);
    char buf[1200];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof buf - 1 && (k = read(p[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)k;
    buf[n] = '\0';
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    int used = 0;
    if (sscanf(buf, "%d %lld %n", &a.rc, &a.val, &used) >= 2) {
        snprintf(a.err, sizeof a.err, "%s", buf + used);
        a.err[strcspn(a.err, "\n")] = '\0';
    }
    return a;
}

/* One variable of params.def set to text: the getter's answer. */
static Answer get(const char *name, const char *text) {
    static char kv[256];
    snprintf(kv, sizeof kv, "%s=%s", name, text);
    const char *env[] = {kv, NULL};
    char probe[128];
    snprintf(probe, sizeof probe, "get:%s", name);
    return ask(probe, text ? env : NULL);
}

#define CHECK_BAD(a, ...) do { Answer a_ = (a); CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, a_.rc); \
    const char *w_[] = {__VA_ARGS__, NULL}; for (int i_ = 0; w_[i_]; i_++) CHECK_CONTAINS(a_.err, w_[i_]); } while (0)

static void test_examples(void) {
    /* the examples */
    Answer a = get("MSCCLRT_CPU_TIMEOUT_MS", "010");
    CHECK_EQ_INT(MSCCLRT_SUCCESS, a.rc);
    CHECK_EQ_INT(10, a.val);   /* was 8: read as octal */
    CHECK_BAD(get("MSCCLRT_BOOT_TIMEOUT_MS", "4294967297"),   /* was 1: truncated */
              "environment variable MSCCLRT_BOOT_TIMEOUT_MS is '4294967297': out of range [1, 86400000]");
    CHECK_BAD(get("MSCCLRT_MASTER_PORT", "4294996807"),       /* was port 29511 */
              "MSCCLRT_MASTER_PORT is '4294996807': out of range [1, 65535]");
    CHECK_BAD(get("MSCCLRT_CPU_TIMEOUT_MS", "0x10"),
              "MSCCLRT_CPU_TIMEOUT_MS is '0x10': not a decimal integer (allowed range [1, 86400000])");
    /* unset and empty: the default */
    a = get("MSCCLRT_BOOT_TIMEOUT_MS", NULL);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, a.rc);
    CHECK_EQ_INT(30000, a.val);
    a = get("MSCCLRT_BOOT_TIMEOUT_MS", "");
    CHECK_EQ_INT(MSCCLRT_SUCCESS, a.rc);
    CHECK_EQ_INT(30000, a.val);
}

/* Every INT row of params.def: both ends accepted, one past either end refused with the range,
 * and text that is not a decimal number refused. */
static void test_every_range(void) {
    int rows = 0;
    for (int i = 0; i < PARAM_COUNT; i++) {
        long long lo, hi;
        if (!param_range((ParamId)i, &lo, &hi)) continue;
        rows++;
        const char *name = param_env_name((ParamId)i);
        char t[64], range[96];
        snprintf(range, sizeof range, "[%lld, %lld]", lo, hi);
        snprintf(t, sizeof t, "%lld", lo);
        Answer a = get(name, t);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, a.rc);
        CHECK_EQ_INT(lo, a.val);
        snprintf(t, sizeof t, "%lld", hi);
        a = get(name, t);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, a.rc);
        CHECK_EQ_INT(hi, a.val);
        snprintf(t, sizeof t, "%lld", hi + 1);
        CHECK_BAD(get(name, t), name, "out of range", range);
        snprintf(t, sizeof t, "%lld", lo - 1);
        CHECK_BAD(get(name, t), name, "out of range", range);
        CHECK_BAD(get(name, " 1"), name, "not a decimal integer", range);
        CHECK_BAD(get(name, "+1"), name, "not a decimal integer", range);
    }
    CHECK(rows >= 8);
}

/* The calls that read the variables fail with the message; nothing exits. */
static void test_api(void) {
    const char *cpu[] = {"MSCCLRT_CPU_TIMEOUT_MS=10s", NULL};
    CHECK_BAD(ask("cpu", cpu), "MSCCLRT_CPU_TIMEOUT_MS is '10s': not a decimal integer");
    const char *cpu_ok[] = {"MSCCLRT_CPU_TIMEOUT_MS=0010", NULL};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, ask("cpu", cpu_ok).rc);
    const char *boot[] = {"MSCCLRT_BOOT_TIMEOUT_MS=4294967297", NULL};
    CHECK_BAD(ask("uid", boot), "MSCCLRT_BOOT_TIMEOUT_MS is '4294967297': out of range [1, 86400000]");
    CHECK_BAD(ask("init", boot), "MSCCLRT_BOOT_TIMEOUT_MS is '4294967297': out of range [1, 86400000]");
    const char *boot0[] = {"MSCCLRT_BOOT_TIMEOUT_MS=0", NULL};
    CHECK_BAD(ask("init", boot0), "MSCCLRT_BOOT_TIMEOUT_MS is '0': out of range [1, 86400000]");
}

/* Environment init: the launchers' numbers through the same parser. */
static void test_launcher(void) {
    const char *port[] = {"MASTER_ADDR=127.0.0.1", "MSCCLRT_MASTER_PORT=4294996807", "RANK=1",
                          "WORLD_SIZE=2", "MSCCLRT_BOOT_TIMEOUT_MS=300", NULL};
    CHECK_BAD(ask("env", port), "MSCCLRT_MASTER_PORT is '4294996807': out of range [1, 65535]");
    const char *mport[] = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=99999", "RANK=1", "WORLD_SIZE=2", NULL};
    CHECK_BAD(ask("env", mport), "MASTER_PORT is '99999': out of range [1, 65535]");
    const char *rank[] = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "RANK= 1", "WORLD_SIZE=2", NULL};
    CHECK_BAD(ask("env", rank), "environment variable RANK is ' 1': not a decimal integer (allowed range [0, 65535])");
    const char *size[] = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "RANK=1", "WORLD_SIZE=+2", NULL};
    CHECK_BAD(ask("env", size), "WORLD_SIZE is '+2': not a decimal integer (allowed range [1, 65536])");
    const char *ompi[] = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "OMPI_COMM_WORLD_RANK=1",
                          "OMPI_COMM_WORLD_SIZE=65537", NULL};
    CHECK_BAD(ask("env", ompi), "OMPI_COMM_WORLD_SIZE is '65537': out of range [1, 65536]");
    const char *local[] = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "RANK=1", "WORLD_SIZE=2",
                           "LOCAL_RANK=0x1", NULL};
    CHECK_BAD(ask("env", local), "LOCAL_RANK is '0x1': not a decimal integer");
    const char *octal[] = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "RANK=010", "WORLD_SIZE=9", NULL};
    CHECK_BAD(ask("env", octal), "rank 10 out of range [0, 9)");   /* ten, not eight */
}

static void test_parser(void) {
    long long v = 7;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, param_parse_int("X", "-5", -10, 10, &v));
    CHECK_EQ_INT(-5, v);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, param_parse_int("X", "0000000000000000000000000000042", 0, 100, &v));
    CHECK_EQ_INT(42, v);
    v = 7;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, param_parse_int("X", "99999999999999999999999", 0, 10, &v));
    CHECK_CONTAINS(mscclrt_last_error(), "out of range [0, 10]");
    CHECK_EQ_INT(7, v);   /* untouched on failure */
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, param_parse_int("X", "99999999999999999999x", 0, 10, &v));
    CHECK_CONTAINS(mscclrt_last_error(), "not a decimal integer");
    const char *bad[] = {"", "-", "1e3", "1.0", "12 ", "0b1", "--1", "１"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, param_parse_int("X", bad[i], -10, 10, &v));
        CHECK_CONTAINS(mscclrt_last_error(), "environment variable X is '");
    }
    char longtext[200];
    memset(longtext, '7', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, param_parse_int("X", longtext, 0, 10, &v));
    CHECK_CONTAINS(mscclrt_last_error(), "7777...': out of range [0, 10]");
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
    alarm(120);
    TEST("param/examples", test_examples());
    TEST("param/every-range", test_every_range());
    TEST("param/api", test_api());
    TEST("param/launcher", test_launcher());
    TEST("param/parser", test_parser());
    return harness_report();
}
