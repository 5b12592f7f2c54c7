/*
 * test_cpus.c - MSCCLRT_PROGRESS_CPUS (runtime/core/cpus.c): the CPU list parser takes exactly
 * the kernel's notation and says which item is wrong, and cpus_place_progress moves a thread of
 * ours there, leaves it alone when the variable is empty, and refuses a malformed list or CPUs
 * the system cannot give, naming the variable; "numa" takes the GPU's local_cpulist from a fake
 * sysfs tree (MSCCLRT_SYSFS_ROOT) and leaves the thread alone where there is none;
 * MSCCLRT_PROGRESS_THREADS moves only the kind it names. The environment is read once per process, so each
 * placement case runs in a forked child that sets it before its first read.
 */
#include "core/cpus.h"
#include "core/err.h"
#include "../harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* what a child sets before placing its thread */
typedef struct {
    const char *threads;   /* MSCCLRT_PROGRESS_THREADS, NULL: unset */
    const char *root;      /* MSCCLRT_SYSFS_ROOT, NULL: unset */
    const char *pci;       /* the GPU's PCI address passed */
    CpusThread kind;
} Opts;
static const Opts plain = {NULL, NULL, NULL, CPUS_SOCKET};

/* exit status: 0 placed as expected (want: the set the thread must end on), 1 otherwise; with
 * `says` the call must fail with MSCCLRT_ERR_INVALID_ARG and a message containing it */
static int child(const char *env, const cpu_set_t *want, const char *says, Opts o) {
    if (env) setenv("MSCCLRT_PROGRESS_CPUS", env, 1);
    if (o.threads) setenv("MSCCLRT_PROGRESS_THREADS", o.threads, 1);
    if (o.root) setenv("MSCCLRT_SYSFS_ROOT", o.root, 1);
    int fd[2];
    pthread_t t;
    if (pipe(fd) != 0 || pthread_create(&t, NULL, idle, fd) != 0) return 1;
    const mscclrt_result r = cpus_place_progress(t, o.kind, "test thread", o.pci);
    cpu_set_t got;
    CPU_ZERO(&got);
    pthread_getaffinity_np(t, sizeof got, &got);
    (void)!write(fd[1], "x", 1);
    pthread_join(t, NULL);
    if (says)
        return r == MSCCLRT_ERR_INVALID_ARG && strstr(mscclrt_last_error(), says) &&
               strstr(mscclrt_last_error(), "MSCCLRT_PROGRESS_") ? 0 : 1;
    return r == MSCCLRT_SUCCESS && CPU_EQUAL(&got, want) ? 0 : 1;
}

static int run_child_o(const char *env, const cpu_set_t *want, const char *says, Opts o) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) _exit(child(env, want, says, o));
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run_child(const char *env, const cpu_set_t *want, const char *says) {
    return run_child_o(env, want, says, plain);
}

/* This process's CPUs (*mine) and the first of them alone (*one); returns that CPU */
static int first_cpu(cpu_set_t *mine, cpu_set_t *one) {
    CHECK_EQ_INT(0, sched_getaffinity(0, sizeof *mine, mine));
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, mine)) first = c;
    CHECK(first >= 0);
    CPU_ZERO(one);
    CPU_SET(first, one);
    return first;
}

static void t_place(void) {
    cpu_set_t mine, one;
    const int first = first_cpu(&mine, &one);
    char env[16];
    snprintf(env, sizeof env, "%d", first);
    CHECK_EQ_INT(0, run_child(env, &one, NULL));       /* moved to the one CPU named */
    CHECK_EQ_INT(0, run_child(NULL, &mine, NULL));     /* unset: numa, no GPU known: stays */
    CHECK_EQ_INT(0, run_child("", &mine, NULL));       /* empty: where it was created */
    CHECK_EQ_INT(0, run_child("4-1", NULL, "the range 4-1 goes backwards"));
    /* a CPU this machine does not have */
    const long conf = sysconf(_SC_NPROCESSORS_CONF);
    if (conf > 0 && conf < CPU_SETSIZE)
        CHECK_EQ_INT(0, run_child("1023", NULL, "the test thread cannot run there"));
}

/* "numa" and MSCCLRT_PROGRESS_THREADS, with a fake sysfs tree whose GPU 0000:17:00.0 is local
 * to this process's first CPU */
static void t_numa(void) {
    cpu_set_t mine, one;
    const int first = first_cpu(&mine, &one);
    char root[] = "/tmp/test_cpus.XXXXXX", dir[128], file[160];
    CHECK(mkdtemp(root) != NULL);
    snprintf(dir, sizeof dir, "%s/bus", root);
    CHECK_EQ_INT(0, mkdir(dir, 0700));
    snprintf(dir, sizeof dir, "%s/bus/pci", root);
    CHECK_EQ_INT(0, mkdir(dir, 0700));
    snprintf(dir, sizeof dir, "%s/bus/pci/devices", root);
    CHECK_EQ_INT(0, mkdir(dir, 0700));
    snprintf(dir, sizeof dir, "%s/bus/pci/devices/0000:17:00.0", root);
    CHECK_EQ_INT(0, mkdir(dir, 0700));
    snprintf(file, sizeof file, "%s/local_cpulist", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) { fprintf(f, "%d\n", first); fclose(f); }
    /* a second GPU whose CPUs this machine does not have (a container given other cores) */
    char dir2[128], file2[160];
    snprintf(dir2, sizeof dir2, "%s/bus/pci/devices/0000:19:00.0", root);
    CHECK_EQ_INT(0, mkdir(dir2, 0700));
    snprintf(file2, sizeof file2, "%s/local_cpulist", dir2);
    f = fopen(file2, "w");
    CHECK(f != NULL);
    if (f) { fprintf(f, "%d\n", CPU_SETSIZE - 1); fclose(f); }
    /* the lookup itself, in a child too (this process must not read the variables first) */
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t got;
        setenv("MSCCLRT_SYSFS_ROOT", root, 1);
        const bool ok = cpus_local_to("0000:17:00.0", &got) && CPU_EQUAL(&got, &one) &&
                        !cpus_local_to("0000:18:00.0", &got) && CPU_COUNT(&got) == 0;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const Opts gpu = {NULL, root, "0000:17:00.0", CPUS_SOCKET};
    CHECK_EQ_INT(0, run_child_o("numa", &one, NULL, gpu));           /* the GPU's CPUs */
    Opts none = gpu;
    none.pci = NULL;
    CHECK_EQ_INT(0, run_child_o("numa", &mine, NULL, none));         /* no GPU: stays */
    none.pci = "0000:18:00.0";
    CHECK_EQ_INT(0, run_child_o("numa", &mine, NULL, none));         /* no such file: stays */
    const long conf = sysconf(_SC_NPROCESSORS_CONF);
    if (conf > 0 && conf < CPU_SETSIZE) {   /* CPUs it cannot have: stays, no failure */
        none.pci = "0000:19:00.0";
        CHECK_EQ_INT(0, run_child_o("numa", &mine, NULL, none));
    }
    Opts only = gpu;
    only.threads = "socket";
    CHECK_EQ_INT(0, run_child_o("numa", &one, NULL, only));          /* a socket thread moves */
    only.kind = CPUS_PROXY;
    CHECK_EQ_INT(0, run_child_o("numa", &mine, NULL, only));         /* the proxy stays */
    only.threads = NULL;
    CHECK_EQ_INT(0, run_child_o(NULL, &one, NULL, only));            /* by default it moves */
    only.kind = CPUS_SOCKET;
    CHECK_EQ_INT(0, run_child_o(NULL, &one, NULL, only));            /* a socket thread moves */
    only.kind = CPUS_PROXY;
    only.threads = "all";
    CHECK_EQ_INT(0, run_child_o("numa", &one, NULL, only));          /* all: the proxy too */
    only.threads = "proxy";
    CHECK_EQ_INT(0, run_child_o("numa", &one, NULL, only));
    only.threads = "sockets";
    CHECK_EQ_INT(0, run_child_o("numa", NULL, "MSCCLRT_PROGRESS_THREADS='sockets': all, socket "
                                "or proxy expected", only));
    remove(file);
    rmdir(dir);
    remove(file2);
    rmdir(dir2);
    snprintf(dir, sizeof dir, "%s/bus/pci/devices", root);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/bus/pci", root);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/bus", root);
    rmdir(dir);
    rmdir(root);
}

int main(void) {
    TEST("cpus: MSCCLRT_PROGRESS_CPUS lists parse exactly, errors name the item", t_parse());
    TEST("cpus: a progress thread moves to the CPUs named, stays without them, bad lists fail",
         t_place());
    TEST("cpus: numa takes the GPU's local CPUs, MSCCLRT_PROGRESS_THREADS picks the kind", t_numa());
    return harness_report();
}
