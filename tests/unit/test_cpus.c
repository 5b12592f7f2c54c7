/*
 * test_cpus.c - MSCCLRT_PROGRESS_CPUS (runtime/core/cpus.c): the CPU list parser takes exactly
 * the kernel's notation and says which item is wrong, and cpus_place_progress moves a thread of
 * ours there, leaves it alone when the variable is empty, and refuses a malformed list or CPUs
 * the system cannot give, naming the variable. The environment is read once per process, so each
 * placement case runs in a forked child that sets it before its first read.
 */
#include "core/cpus.h"
#include "core/err.h"
#include "../harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int count(const cpu_set_t *s) { return CPU_COUNT(s); }

static void t_parse(void) {
    cpu_set_t s;
    char why[128];
    CHECK(cpus_parse("0", &s, why, sizeof why) && count(&s) == 1 && CPU_ISSET(0, &s));
    CHECK(cpus_parse("0-3,8", &s, why, sizeof why) && count(&s) == 5 && CPU_ISSET(3, &s) &&
          CPU_ISSET(8, &s) && !CPU_ISSET(4, &s));
    CHECK(cpus_parse("", &s, why, sizeof why) && count(&s) == 0);
    CHECK(cpus_parse(NULL, &s, why, sizeof why) && count(&s) == 0);
    CHECK(cpus_parse("07", &s, why, sizeof why) && CPU_ISSET(7, &s) && count(&s) == 1);
    CHECK(cpus_parse("2-2,2", &s, why, sizeof why) && count(&s) == 1);
    CHECK(cpus_parse("0-1023", &s, why, sizeof why) && count(&s) == CPU_SETSIZE);
    static const struct { const char *in, *says; } bad[] = {
        {"3-1", "item 1: the range 3-1 goes backwards"},
        {"1,,2", "item 2: a CPU number"},
        {"1,", "item 2: a CPU number"},
        {"a", "item 1: a CPU number from 0 to 1023 expected at 'a'"},
        {"1-", "expected after '-'"},
        {"1 ", "item 1: ',' or the end expected at ' '"},
        {" 1", "item 1: a CPU number"},
        {"-1", "item 1: a CPU number"},
        {"0,1024", "item 2: a CPU number from 0 to 1023"},
        {"99999999999999999999", "item 1: a CPU number"},
        {"0-3;5", "',' or the end expected at ';5'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CPU_SET(5, &s);
        why[0] = 0;
        CHECK(!cpus_parse(bad[i].in, &s, why, sizeof why));
        CHECK_CONTAINS(why, bad[i].says);
        CHECK_EQ_INT(0, count(&s));   /* nothing half-parsed */
    }
}

/* ---- placement, in a child with MSCCLRT_PROGRESS_CPUS = env -------------------------------- */
static void *idle(void *arg) {
    int *fd = arg;
    char c;
    while (read(fd[0], &c, 1) < 0) { }
    return NULL;
}

/* exit status: 0 placed as expected (want: the set the thread must end on), 1 otherwise; with
 * `says` the call must fail with MSCCLRT_ERR_INVALID_ARG and a message containing it */
static int child(const char *env, const cpu_set_t *want, const char *says) {
    if (env) setenv("MSCCLRT_PROGRESS_CPUS", env, 1);
    int fd[2];
    pthread_t t;
    if (pipe(fd) != 0 || pthread_create(&t, NULL, idle, fd) != 0) return 1;
    const mscclrt_result r = cpus_place_progress(t, "test thread");
    cpu_set_t got;
    CPU_ZERO(&got);
    pthread_getaffinity_np(t, sizeof got, &got);
    (void)!write(fd[1], "x", 1);
    pthread_join(t, NULL);
    if (says)
        return r == MSCCLRT_ERR_INVALID_ARG && strstr(mscclrt_last_error(), says) &&
               strstr(mscclrt_last_error(), "MSCCLRT_PROGRESS_CPUS") ? 0 : 1;
    return r == MSCCLRT_SUCCESS && CPU_EQUAL(&got, want) ? 0 : 1;
}

static int run_child(const char *env, const cpu_set_t *want, const char *says) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) _exit(child(env, want, says));
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void t_place(void) {
    cpu_set_t mine, one;
    CHECK_EQ_INT(0, sched_getaffinity(0, sizeof mine, &mine));
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &mine)) first = c;
    CHECK(first >= 0);
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    char env[16];
    snprintf(env, sizeof env, "%d", first);
    CHECK_EQ_INT(0, run_child(env, &one, NULL));       /* moved to the one CPU named */
    CHECK_EQ_INT(0, run_child(NULL, &mine, NULL));     /* unset: where it was created */
    CHECK_EQ_INT(0, run_child("", &mine, NULL));       /* empty: the same */
    CHECK_EQ_INT(0, run_child("4-1", NULL, "the range 4-1 goes backwards"));
    /* a CPU this machine does not have */
    const long conf = sysconf(_SC_NPROCESSORS_CONF);
    if (conf > 0 && conf < CPU_SETSIZE)
        CHECK_EQ_INT(0, run_child("1023", NULL, "the test thread cannot run there"));
}

int main(void) {
    TEST("cpus: MSCCLRT_PROGRESS_CPUS lists parse exactly, errors name the item", t_parse());
    TEST("cpus: a progress thread moves to the CPUs named, stays without them, bad lists fail",
         t_place());
    return harness_report();
}
