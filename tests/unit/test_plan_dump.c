/*
 * test_plan_dump.c - the human views of a plan (plan_dump_table, plan_dump_dot): content of the
 * lines that matter (pairing, remote buffers, op lines), determinism, dot well-formedness.
 * With arguments it is also the dump command of tests/cases/plan_dump.sh, which compares the
 * output with tests/golden/dump/: test_plan_dump --dump [--dot] plan.json
 */
#include "../harness.h"
#include "test_plan_util.h"

static char *dump(const Plan *p, bool dot) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    if (dot) plan_dump_dot(p, f);
    else plan_dump_table(p, f);
    fclose(f);
    return buf;
}

static void t_table(void) {
    PlanErr e;
    Plan *p = plan_load_file("tests/plans/loader_base.json", &e);
    CHECK(p != NULL);
    if (!p) return;
    char *t = dump(p, false);
    CHECK_CONTAINS(t, "plan        loader_base\ncollective  allreduce\nprotocol    Simple\n"
                      "ranks       2\n");
    CHECK_CONTAINS(t, "sizes       0 .. 1099511627776 bytes\nscratch     2 chunks\n");
    CHECK_CONTAINS(t, "\nrank 1: input 2 chunks, output 2 chunks, scratch 2 chunks, 2 thread "
                      "blocks\n  channels\n    memory#0 -> rank 0, pairs with rank 0 memory#0\n"
                      "    port#0 -> rank 0, pairs with rank 0 port#0\n"
                      "    switch#0 on scratch, ranks 0,1\n");
    CHECK_CONTAINS(t, "    rb#0 rank 1 scratch, via memory#0 port#0\n"
                      "    rb#1 rank 1 input, via memory#1\n  semaphores #0=0\n");
    CHECK_CONTAINS(t, "  tb 0: 11 ops, memory #0=ch0(rank 1), port #0=ch0(rank 1), mem refs "
                      "#0=rb0 #1=rb1, port refs #0=rb0\n      0  nop\n");
    CHECK_CONTAINS(t, "      6  rre         memory i[0:1], rank1.i[0:1] via mem#1 -> i[0:1] (sum)\n");
    CHECK_CONTAINS(t, "      4  pws         port[0] i[1:2] -> rank0.s[1:2] via port#0\n");
    CHECK_CONTAINS(t, "      9  pipeline    unit 1024 bytes, 1 chunk, 1 op\n"
                      "           0  copy        s[0:1] -> o[0:1] tbg 0/2\n");
    CHECK_CONTAINS(t, "      2  glres       switch sw#0.s[0:1] -> sw#0.s[0:1] (sum)\n");
    CHECK(t && !strstr(t, " \n")); /* no trailing blanks */
    char *t2 = dump(p, false);
    CHECK(t && t2 && strcmp(t, t2) == 0);
    free(t2);
    free(t);

    /* a second memory channel from rank 0 to rank 1 has no partner on rank 1 */
    plan_gpu_add_peer(&p->gpus[0], PLAN_CHAN_MEMORY, 1);
    t = dump(p, false);
    CHECK_CONTAINS(t, "    memory#1 -> rank 1, unpaired (rank 1 has fewer memory channels back)\n");
    free(t);
    plan_free(p);
}

static void t_dot(void) {
    PlanErr e;
    Plan *p = plan_load_file(COMPAT_DIR "allreduce.json", &e);
    CHECK(p != NULL);
    if (!p) return;
    char *d = dump(p, true);
    CHECK_CONTAINS(d, "digraph \"allreduce\" {\n");
    CHECK_CONTAINS(d, "  subgraph cluster_r1 {\n    label=\"rank 1\";\n");
    /* 8 memory channels to the same peer pair k-th with k-th: TB t uses channel t on both */
    CHECK_CONTAINS(d, "  r0t5 -> r1t5 [dir=both, style=solid, label=\"mem 5:5\"];\n");
    int open = 0, close = 0;
    for (const char *c = d; c && *c; c++) {
        open += *c == '{';
        close += *c == '}';
    }
    CHECK(open > 0 && open == close);
    plan_free(p);
    free(d);
    p = plan_load_file(COMPAT_DIR "reduce_nvls.json", &e);
    d = p ? dump(p, true) : NULL;
    CHECK_CONTAINS(d, "  sw_i_0_1_k0 [shape=ellipse, label=\"switch on input\\nranks 0,1\"];\n");
    CHECK_CONTAINS(d, "  r1t0 -> sw_i_0_1_k0 [style=dotted];\n");
    plan_free(p);
    free(d);
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--dump") == 0) {
        bool dot = argc >= 4 && strcmp(argv[2], "--dot") == 0;
        PlanErr e;
        Plan *p = plan_load_file(argv[argc - 1], &e);
        if (!p) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        if (dot) plan_dump_dot(p, stdout);
        else plan_dump_table(p, stdout);
        plan_free(p);
        return 0;
    }
    TEST("plan_dump/table", t_table());
    TEST("plan_dump/dot", t_dot());
    return harness_report();
}
