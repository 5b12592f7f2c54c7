/*
 * test_plan_escape.c - printing a plan's strings (plan_escape.c): control characters, escape
 * sequences, C1 and bidirectional controls and invalid UTF-8 are escaped, valid UTF-8 stays,
 * long strings are cut with "..."; and the users: the dump, the loader's and geometry's messages,
 * and the comment atop generated kernel source (which a name must not be able to close).
 * tests/cases/plan_escape.sh checks the commands.
 */
#include "../harness.h"
#include "test_plan_util.h"

#include "codegen/codegen.h"
#include "mscclrt.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void t_escape(void) {
    char b[PLAN_ESC_MAX];
    CHECK_STR("allreduce_8", plan_escape(b, sizeof b, "allreduce_8"));
    CHECK_STR("\\x1b[2J", plan_escape(b, sizeof b, "\x1b[2J"));
    CHECK_STR("a\\tb\\nc\\rd\\\\e\\x07\\x7f\\x01", plan_escape(b, sizeof b, "a\tb\nc\rd\\e\a\x7f\x01"));
    /* valid UTF-8 stays; C1 controls (CSI U+009B) and bidirectional overrides do not */
    CHECK_STR("gr\xc3\xbc\xc3\x9f \xe6\x97\xa5 \xf0\x9f\x98\x80",
              plan_escape(b, sizeof b, "gr\xc3\xbc\xc3\x9f \xe6\x97\xa5 \xf0\x9f\x98\x80"));
    CHECK_STR("\\u009b2J", plan_escape(b, sizeof b, "\xc2\x9b" "2J"));
    CHECK_STR("x\\u202ey\\u2066z\\u2028", plan_escape(b, sizeof b, "x\xe2\x80\xaey\xe2\x81\xa6z\xe2\x80\xa8"));
    /* not UTF-8: stray continuation, truncated sequence, overlong, surrogate, > U+10FFFF */
    CHECK_STR("\\x80\\xff", plan_escape(b, sizeof b, "\x80\xff"));
    CHECK_STR("\\xe6\\x97", plan_escape(b, sizeof b, "\xe6\x97"));
    CHECK_STR("\\xc0\\xaf", plan_escape(b, sizeof b, "\xc0\xaf"));
    CHECK_STR("\\xe0\\x80\\xaf", plan_escape(b, sizeof b, "\xe0\x80\xaf"));
    CHECK_STR("\\xed\\xa0\\x80", plan_escape(b, sizeof b, "\xed\xa0\x80"));
    CHECK_STR("\\xf4\\x90\\x80\\x80", plan_escape(b, sizeof b, "\xf4\x90\x80\x80"));
    CHECK_STR("(null)", plan_escape(b, sizeof b, NULL));
    /* cut at a piece boundary, "..." included in the size */
    CHECK_STR("abcd", plan_escape(b, 5, "abcd"));
    CHECK_STR("a...", plan_escape(b, 5, "abcde"));
    CHECK_STR("...", plan_escape(b, 5, "\x1b\x1b"));
    CHECK_STR("ab...", plan_escape(b, 8, "ab\x1b[2J"));
    char longs[1000];
    memset(longs, 'n', sizeof longs - 1);
    longs[sizeof longs - 1] = 0;
    const char *e = PLAN_ESC(longs);
    CHECK_EQ_INT(PLAN_ESC_MAX - 1, strlen(e));
    CHECK(strcmp(e + PLAN_ESC_MAX - 4, "...") == 0);
    /* the stream form is not cut */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    plan_escape_fputs(longs, f);
    plan_escape_fputs("\x1b]0;t\a", f);
    fclose(f);
    CHECK_EQ_INT(sizeof longs - 1 + strlen("\\x1b]0;t\\x07"), len);
    CHECK(out && strcmp(out + sizeof longs - 1, "\\x1b]0;t\\x07") == 0);
    free(out);
}

/* No byte below 0x20 but newline, and no DEL, in text. */
static bool clean(const char *text) {
    for (const unsigned char *c = (const unsigned char *)text; c && *c; c++)
        if ((*c < 0x20 && *c != '\n') || *c == 0x7f) return false;
    return text != NULL;
}

static Plan *hostile_plan(void) {
    PlanErr e;
    Plan *p = plan_load_file("tests/plans/loader_base.json", &e);
    CHECK(p != NULL);
    if (!p) return NULL;
    free(p->name);
    p->name = strdup("evil\x1b[2J\x1b]0;title\a\xff */ int injected; /*");
    return p;
}

static void t_dump(void) {
    Plan *p = hostile_plan();
    if (!p) return;
    for (int dot = 0; dot < 2; dot++) {
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        if (dot) plan_dump_dot(p, f);
        else plan_dump_table(p, f);
        fclose(f);
        CHECK(clean(out));
        CHECK_CONTAINS(out, dot ? "digraph \"evil\\\\x1b[2J\\\\x1b]0;title\\\\x07\\\\xff"
                                : "plan        evil\\x1b[2J\\x1b]0;title\\x07\\xff */");
        free(out);
    }
    plan_free(p);
}

static void t_messages(void) {
    /* the geometry's messages name the plan */
    Plan *p = hostile_plan();
    if (!p) return;
    PlanGeom g;
    PlanErr e;
    CHECK(!plan_geom(p, 7, 64, 64, &g, &e));
    CHECK(clean(e.msg));
    CHECK_CONTAINS(e.msg, "plan 'evil\\x1b[2J\\x1b]0;title\\x07\\xff */ int injected; /*': rank 7");
    /* the loader quotes JSON strings and the text near a syntax error */
    const char *bad_coll = "{\"name\": \"x\", \"collective\": \"\\u001b[31mred\", \"protocol\": "
                           "\"LL\", \"inplace\": false, \"gpus\": []}";
    CHECK(plan_parse(bad_coll, strlen(bad_coll), "p.json", &e) == NULL);
    CHECK_STR("p.json: collective: unknown collective '\\x1b[31mred' (expected allreduce, "
              "allgather, reducescatter, alltoall, broadcast, sendrecv, reduce, gather, scatter, test or custom)", e.msg);
    const char *bad_json = "{\"name\": \x7f\x9b" "2J}";   /* cJSON skips bytes <= 32 as spaces */
    CHECK(plan_parse(bad_json, strlen(bad_json), "p.json", &e) == NULL);
    CHECK_CONTAINS(e.msg, "JSON syntax error near '\\x7f\\x9b2J}'");
    CHECK(clean(e.msg));
    /* the backends' messages too: a 2-rank plan on a 3-rank CPU communicator */
    char path[] = "/tmp/test_plan_escape.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(plan_write_file(p, path, true, NULL, &e));
    mscclrt_plan *h = NULL;
    mscclrt_cpu_comm *comm = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_load(&h, path));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cpu_comm_create(&comm, 3));
    char buf[3][64];
    void *bufs[3] = {buf[0], buf[1], buf[2]};
    CHECK(mscclrt_cpu_execute(comm, h, bufs, bufs, 64, 64, MSCCLRT_FLOAT32, MSCCLRT_SUM,
                              MSCCLRT_LL16) != MSCCLRT_SUCCESS);
    CHECK(clean(mscclrt_last_error()));
    CHECK_CONTAINS(mscclrt_last_error(), "plan 'evil\\x1b[2J\\x1b]0;title\\x07\\xff");
    mscclrt_cpu_comm_destroy(comm);
    mscclrt_plan_free(h);
    unlink(path);
    plan_free(p);
}

/* The generated kernel source opens with a comment naming the plan: a name holding a comment
 * end must not end it early (code injection into the kernel), nor bring control characters. */
static void t_codegen_comment(void) {
    Plan *p = hostile_plan();
    if (!p) return;
    char *src = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, cg_generate(p, 0, MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16, &src));
    if (src) {
        char *nl = strchr(src, '\n');
        CHECK(nl != NULL);
        if (nl) *nl = 0;
        CHECK(clean(src));
        const char *end = strstr(src, "*/");
        CHECK(end != NULL && end[2] == 0);     /* the only comment end is the line's own */
        CHECK_CONTAINS(src, "plan 'evil\\x1b[2J\\x1b]0;title\\x07\\xff * / int injected; /*'");
    }
    free(src);
    plan_free(p);
}

int main(void) {
    TEST("plan_escape/escape", t_escape());
    TEST("plan_escape/dump", t_dump());
    TEST("plan_escape/messages", t_messages());
    TEST("plan_escape/codegen_comment", t_codegen_comment());
    return harness_report();
}
