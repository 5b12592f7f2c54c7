/*
 * test_plan_write.c - the plan writer: every compat plan survives load -> write -> load with an
 * identical model and byte-identical text (the DSL's json.dumps(indent=2) layout), the exact DSL
 * key order, compact output, exact 64-bit integers and the atomic file write.
 */
#include "../harness.h"
#include "test_plan_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

/* Position of needle in hay, or -1. */
static long pos(const char *hay, const char *needle) {
    const char *p = hay ? strstr(hay, needle) : NULL;
    return p ? (long)(p - hay) : -1;
}

/* Checks that the needles occur in hay in this order, each after the previous one. */
static bool in_order(const char *hay, const char *const *needles, int n) {
    long at = -1;
    for (int i = 0; i < n; i++) {
        const char *p = strstr(hay + (at < 0 ? 0 : at), needles[i]);
        if (!p) {
            fprintf(stderr, "missing or out of order: %s\n", needles[i]);
            return false;
        }
        at = (long)(p - hay) + 1;
    }
    return true;
}

/* A plan built in memory that uses every key the writer can emit. */
static Plan *build_full_plan(void) {
    Plan *p = plan_new("full", PLAN_COLL_ALLREDUCE, 2);
    if (!p) return NULL;
    p->max_size = 9007199254740993ull; /* 2^53 + 1: not representable as a double */
    p->min_size = 4096;
    p->threads = 512;
    p->ntags = 1;
    p->tags = calloc(1, sizeof *p->tags);
    p->tags[0] = strdup("nvlink");
    for (int r = 0; r < 2; r++) {
        PlanGpu *g = &p->gpus[r];
        int q = 1 - r, both[2] = {0, 1};
        g->input_chunks = g->output_chunks = 2;
        g->scratch_chunks = 2;
        plan_gpu_add_peer(g, PLAN_CHAN_MEMORY, q);
        plan_gpu_add_peer(g, PLAN_CHAN_PORT, q);
        plan_gpu_add_switch(g, PLAN_BUF_SCRATCH, both, 2);
        plan_gpu_add_remote(g, q, PLAN_BUF_SCRATCH, PLAN_CHAN_MEMORY);
        plan_gpu_add_remote(g, q, PLAN_BUF_SCRATCH, PLAN_CHAN_PORT);
        plan_gpu_add_semaphore(g, 1);
        plan_gpu_ensure_tbs(g, 2);
        PlanTb *tb = &g->tbs[0];
        plan_tb_use_channel(tb, PLAN_CHAN_MEMORY, 0);
        plan_tb_use_channel(tb, PLAN_CHAN_PORT, 0);
        plan_tb_use_channel(tb, PLAN_CHAN_SWITCH, 0);
        plan_tb_use_remote(tb, PLAN_CHAN_MEMORY, 0);
        plan_tb_use_remote(tb, PLAN_CHAN_PORT, 0);
        PlanOp op;
        plan_op_init(&op, PLAN_OP_BARRIER);
        op.barrier_id = 3;
        op.num_threadblocks = 2;
        plan_tb_append(tb, &op);
        plan_tb_append(&g->tbs[1], &op);
        plan_op_init(&op, PLAN_OP_PWS);
        op.chan_type = PLAN_CHAN_PORT;
        op.nchan = 1;
        op.nsrc = op.ndst = 1;
        op.src[0] = (PlanRef){PLAN_REF_LOCAL, PLAN_BUF_INPUT, 0, 1, 1, -1};
        op.dst[0] = (PlanRef){PLAN_REF_REMOTE, PLAN_BUF_INPUT, 0, 1, 1, -1};
        plan_tb_append(tb, &op);
        plan_op_init(&op, PLAN_OP_SEM_RELEASE);
        op.nsem = 1;
        plan_tb_append(tb, &op);
        plan_op_init(&op, PLAN_OP_RRE);
        op.chan_type = PLAN_CHAN_MEMORY;
        op.reduce_op = PLAN_RED_SUM;
        op.tbg_id = 1;
        op.tbg_size = 2;
        op.nsrc = 2;
        op.ndst = 1;
        op.src[0] = (PlanRef){PLAN_REF_LOCAL, PLAN_BUF_INPUT, 0, 0, 1, -1};
        op.src[1] = (PlanRef){PLAN_REF_REMOTE, PLAN_BUF_INPUT, 0, 0, 1, -1};
        op.dst[0] = (PlanRef){PLAN_REF_LOCAL, PLAN_BUF_INPUT, 0, 0, 1, -1};
        plan_tb_append(tb, &op);
        PlanOp pipe;
        plan_op_init(&pipe, PLAN_OP_PIPELINE);
        pipe.unit_size = 1 << 20;
        pipe.num_chunks = 1;
        pipe.ninner = 1;
        pipe.inner = calloc(1, sizeof *pipe.inner);
        plan_op_init(&pipe.inner[0], PLAN_OP_GSTORE);
        pipe.inner[0].chan_type = PLAN_CHAN_SWITCH;
        pipe.inner[0].nsrc = pipe.inner[0].ndst = 1;
        pipe.inner[0].src[0] = (PlanRef){PLAN_REF_LOCAL, PLAN_BUF_OUTPUT, 0, 0, 1, r};
        pipe.inner[0].dst[0] = (PlanRef){PLAN_REF_SWITCH, PLAN_BUF_INPUT, 0, 0, 1, -1};
        plan_tb_append(tb, &pipe);
        plan_op_release(&pipe);
    }
    return p;
}

static int count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, needle)) n++;
    closedir(d);
    return n;
}

static void t_compat_round_trip(void) {
    for (int i = 0; i < NCOMPAT; i++) {
        char path[256];
        snprintf(path, sizeof path, COMPAT_DIR "%s.json", compat_plans[i]);
        size_t len;
        char *orig = tp_read_file(path, &len);
        CHECK(orig != NULL);
        PlanErr e;
        Plan *a = plan_load_file(path, &e);
        if (!a) fprintf(stderr, "%s\n", e.msg);
        CHECK(a != NULL);
        if (!a || !orig) continue;
        char *text = plan_to_json(a, false, NULL);
        CHECK(text != NULL);
        Plan *b = text ? plan_parse(text, strlen(text), "written", &e) : NULL;
        CHECK(b != NULL);
        char why[256] = "";
        bool eq = b && tp_plan_eq(a, b, why, sizeof why);
        if (!eq) fprintf(stderr, "%s: models differ: %s\n", path, why);
        CHECK(eq);
        /* the DSL's own layout: identical bytes up to the trailing newline */
        while (len > 0 && (orig[len - 1] == '\n' || orig[len - 1] == ' ')) orig[--len] = '\0';
        if (text && strcmp(orig, text) != 0) fprintf(stderr, "%s: text differs\n", path);
        CHECK(text && strcmp(orig, text) == 0);
        /* compact form: no layout whitespace, same model */
        char *compact = plan_to_json(a, true, NULL);
        CHECK(compact && !strchr(compact, '\n') && !strstr(compact, ": "));
        Plan *c = compact ? plan_parse(compact, strlen(compact), "compact", &e) : NULL;
        CHECK(c && tp_plan_eq(a, c, why, sizeof why));
        plan_free(a);
        plan_free(b);
        plan_free(c);
        free(text);
        free(compact);
        free(orig);
    }
}

static void t_key_order(void) {
    PlanErr e;
    Plan *p = plan_load_file(COMPAT_DIR "reduce.json", &e);
    CHECK(p != NULL);
    char *t = p ? plan_to_json(p, false, "mscclc 0.1.0") : NULL;
    static const char *const top[] = {
        "\n  \"name\": ", "\n  \"collective\": ", "\n  \"protocol\": ", "\n  \"inplace\": ",
        "\n  \"reuse_resources\": ", "\n  \"gpus\": ", "\n  \"num_threads_per_block\": ",
        "\n  \"use_double_scratch_buffer\": ", "\n  \"buffer_alignment\": ",
        "\n  \"min_message_size\": ", "\n  \"max_message_size\": 18446744073709551615",
        "\n  \"producer\": \"mscclc 0.1.0\"\n}"};
    CHECK(t && in_order(t, top, 12));
    static const char *const gpu[] = {"\"id\": 0", "\"input_chunks\"", "\"output_chunks\"",
                                      "\"scratch_chunks\"", "\"threadblocks\"", "\"ops\"",
                                      "\"remote_buffer_refs\"", "\"connected_to\"",
                                      "\"remote_buffers\"", "\"access_channel_types\"",
                                      "\"semaphores\": []"};
    CHECK(t && in_order(t, gpu, 11));
    CHECK(pos(t, "\"tags\"") < 0); /* only written when there are tags */
    free(t);
    plan_free(p);
}

static void t_op_keys_and_extensions(void) {
    Plan *p = build_full_plan();
    PlanErr e;
    CHECK(p != NULL);
    bool ok = p && plan_validate(p, "full", &e);
    if (!ok) fprintf(stderr, "%s\n", p ? e.msg : "oom");
    CHECK(ok);
    char *t = p ? plan_to_json(p, false, NULL) : NULL;
    CHECK(t != NULL);
    if (t) {
        CHECK_CONTAINS(t, "\"max_message_size\": 9007199254740993,\n  \"tags\": [\n    \"nvlink\"\n  ]\n}");
        static const char *const barrier[] = {"\"name\": \"barrier\"", "\"barrier_id\": 3",
                                              "\"num_threadblocks\": 2"};
        CHECK(in_order(t, barrier, 3));
        static const char *const pws[] = {"\"name\": \"pws\"", "\"src_buff\"", "\"dst_buff\"",
                                          "\"buffer_id\": 0", "\"channel_ids\"",
                                          "\"channel_type\": \"port\""};
        CHECK(in_order(t, pws, 6));
        static const char *const rre[] = {"\"name\": \"rre\"", "\"src_buff\"", "\"dst_buff\"",
                                          "\"channel_type\": \"memory\"",
                                          "\"reduce_op\": \"sum\"", "\"tbg_info\"",
                                          "\"tb_id\": 1", "\"tbg_size\": 2"};
        CHECK(in_order(t, rre, 8));
        static const char *const pipe[] = {"\"name\": \"pipeline\"", "\"iter_context\"",
                                           "\"unit_size\": 1048576", "\"num_chunks\": 1",
                                           "\"ops\"", "\"name\": \"gstore\"", "\"rank\": 0",
                                           "\"type\": \"o\"", "\"switch_channel_id\": 0",
                                           "\"channel_type\": \"switch\""};
        CHECK(in_order(t, pipe, 10));
        static const char *const tbch[] = {"\"channel_type\": \"memory\"", "\"channel_ids\"",
                                           "\"channel_type\": \"port\"",
                                           "\"channel_type\": \"switch\"",
                                           "\"remote_buffer_refs\"",
                                           "\"access_channel_type\": \"memory\"",
                                           "\"access_channel_type\": \"port\""};
        CHECK(in_order(t, tbch, 7));
        CHECK_CONTAINS(t, "\"access_channel_types\": [\n            \"memory\",\n"
                          "            \"port\"\n          ]");
        CHECK_CONTAINS(t, "\"rank_groups\": [\n            {\n              \"size\": 2,");
        CHECK_CONTAINS(t, "\"semaphores\": [\n        {\n          \"init_value\": 1");
        /* a nop is just its name; sem ops carry their ids */
        CHECK_CONTAINS(t, "\"name\": \"sem_release\",\n              \"semaphore_ids\": [\n"
                          "                0\n              ]\n            }");
        Plan *q = plan_parse(t, strlen(t), "full", &e);
        char why[256] = "";
        CHECK(q && tp_plan_eq(p, q, why, sizeof why));
        if (q) CHECK(q->max_size == 9007199254740993ull);
        plan_free(q);
        /* determinism */
        char *t2 = plan_to_json(p, false, NULL);
        CHECK(t2 && strcmp(t, t2) == 0);
        free(t2);
    }
    free(t);
    plan_free(p);
}

static void t_atomic_file(void) {
    Plan *p = build_full_plan();
    PlanErr e;
    char dir[] = "/tmp/test_plan_write.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[300], bad[300];
    snprintf(path, sizeof path, "%s/out.json", dir);
    CHECK(p && plan_write_file(p, path, true, NULL, &e));
    Plan *q = plan_load_file(path, &e);
    CHECK(q != NULL);
    plan_free(q);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
    /* a directory where the file should go: refused, nothing is left behind */
    snprintf(bad, sizeof bad, "%s/isdir", dir);
    CHECK(mkdir(bad, 0755) == 0);
    e.msg[0] = '\0';
    CHECK(!plan_write_file(p, bad, false, NULL, &e));
    CHECK_CONTAINS(e.msg, "isdir: not a regular file, character device or FIFO (a directory)");
    CHECK_EQ_INT(0, count_files(dir, ".tmp."));
    /* a directory that does not exist */
    snprintf(bad, sizeof bad, "%s/nodir/out.json", dir);
    CHECK(!plan_write_file(p, bad, false, NULL, &e));
    CHECK_CONTAINS(e.msg, "nodir/out.json: cannot create temporary file in '");
    CHECK_CONTAINS(e.msg, "nodir': No such file or directory");
    snprintf(bad, sizeof bad, "%s/isdir", dir);
    rmdir(bad);
    unlink(path);
    CHECK(rmdir(dir) == 0);
    plan_free(p);
}

/* plan_json_size counts exactly what plan_to_json writes; plan_json_op_size is what one more
 * op adds to a thread block (the compiler's running size of the plan it builds). */
static void t_json_size(void) {
    Plan *p = build_full_plan();
    CHECK(p != NULL);
    if (!p) return;
    char **tags = realloc(p->tags, (size_t)(p->ntags + 1) * sizeof *tags);   /* escapes count too */
    CHECK(tags != NULL);
    if (tags) {
        p->tags = tags;
        p->tags[p->ntags++] = strdup("q\"b\\n\nt\tc\x01\x1f\xc3\xa9");
    }
    for (int compact = 0; compact < 2; compact++) {
        char *t = plan_to_json(p, compact, "producer");
        CHECK(t && plan_json_size(p, compact, "producer") == strlen(t));
        free(t);
        t = plan_to_json(p, compact, NULL);
        CHECK(t && plan_json_size(p, compact, NULL) == strlen(t));
        /* the growth of a thread block that already has ops, by each op it has */
        PlanTb *tb = NULL;
        for (int r = 0; r < p->ngpus && !tb; r++)
            for (int k = 0; k < p->gpus[r].ntbs && !tb; k++)
                if (p->gpus[r].tbs[k].nops > 0) tb = &p->gpus[r].tbs[k];
        CHECK(tb != NULL);
        int n = tb ? tb->nops : 0;
        for (int i = 0; i < n; i++) {
            bool ok = true;
            PlanOp op = plan_op_clone(&tb->ops[i], &ok);   /* appending may move tb->ops */
            size_t before = plan_json_size(p, compact, NULL);
            CHECK(ok && plan_tb_append(tb, &op));
            CHECK_EQ_INT((long long)plan_json_op_size(&op, compact),
                         (long long)(plan_json_size(p, compact, NULL) - before));
            plan_op_release(&op);
        }
        free(t);
    }
    plan_free(p);
}

/* Only regular files (and new paths) are replaced by rename: links are followed, character
 * devices and FIFOs are written straight (renaming over /dev/null as root made it a file). */
static void t_write_targets(void) {
    Plan *p = build_full_plan();
    PlanErr e;
    char dir[] = "/tmp/test_plan_write.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char real[300], link[300], dangling[300], fifo[300];
    snprintf(real, sizeof real, "%s/real.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    snprintf(dangling, sizeof dangling, "%s/dangling.json", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    /* an existing file keeps its permission bits */
    FILE *f = fopen(real, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK(chmod(real, 0600) == 0);
    CHECK(p && plan_write_file(p, real, false, NULL, &e));
    struct stat st;
    CHECK(stat(real, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size > 100);
    /* a symbolic link: the target gets the plan, the link stays a link */
    CHECK(truncate(real, 0) == 0);
    CHECK(symlink("real.json", link) == 0);
    CHECK(plan_write_file(p, link, false, NULL, &e));
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(stat(real, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 100);
    /* a link to nothing: refused, nothing created */
    CHECK(symlink("missing.json", dangling) == 0);
    CHECK(!plan_write_file(p, dangling, false, NULL, &e));
    CHECK_CONTAINS(e.msg, "dangling.json: a symbolic link to a file that cannot be reached");
    CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    /* a character device: written straight, still a device afterwards. Never /dev/null itself
     * as root (a regression would replace it): root makes its own null device node here, and
     * another user cannot replace /dev/null anyway */
    char null[300];
    snprintf(null, sizeof null, "%s/null", dir);
    bool have_null = true;
    if (geteuid() != 0) snprintf(null, sizeof null, "/dev/null");
    else have_null = mknod(null, S_IFCHR | 0666, makedev(1, 3)) == 0;   /* not in every container */
    if (have_null) {
        CHECK(plan_write_file(p, null, true, NULL, &e));
        CHECK(stat(null, &st) == 0 && S_ISCHR(st.st_mode));
    }
    if (geteuid() == 0) unlink(null);
    /* a FIFO with a reader: the reader gets the plan, the FIFO stays a FIFO */
    CHECK(mkfifo(fifo, 0600) == 0);
    pid_t pid = fork();
    if (pid == 0) {   /* the reader: count the bytes and exit with 0 if it got a whole plan */
        int fd = open(fifo, O_RDONLY);
        char buf[4096];
        ssize_t got, total = 0;
        while (fd >= 0 && (got = read(fd, buf, sizeof buf)) > 0) total += got;
        _exit(total > 100 && buf[0] != 0 ? 0 : 1);
    }
    CHECK(pid > 0);
    CHECK(plan_write_file(p, fifo, false, NULL, &e));
    int wst = 1;
    CHECK(pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK_EQ_INT(0, count_files(dir, ".tmp."));
    unlink(real);
    unlink(link);
    unlink(dangling);
    unlink(fifo);
    CHECK(rmdir(dir) == 0);
    plan_free(p);
}

int main(void) {
    TEST("plan_write/compat_round_trip", t_compat_round_trip());
    TEST("plan_write/key_order", t_key_order());
    TEST("plan_write/op_keys_and_extensions", t_op_keys_and_extensions());
    TEST("plan_write/atomic_file", t_atomic_file());
    TEST("plan_write/write_targets", t_write_targets());
    TEST("plan_write/json_size", t_json_size());
    return harness_report();
}
