/*
 * test_diag.c - unit tests of the compiler's diagnostics (compiler/diag.c): the GCC/Clang form,
 * the source line and caret (tabs kept), ranges, notes and warnings, the error limit, positions
 * outside the source, and the collected-text mode.
 */
#include "diag.h"

#include <stdlib.h>
#include <string.h>

#include "../harness.h"

static const char *SRC =
    "program p {\n"
    "    copy(input[9], output[1])\n"
    "\tx = 1;\r\n"
    "last";

/* A diagnostic shows at most 200 bytes of its source line, around the caret. */
static void t_long_line_window(void) {
    size_t n = 1 << 20;
    char *src = malloc(n + 1);
    CHECK(src != NULL);
    if (!src) return;
    memset(src, 'a', n);
    src[n] = 0;
    memcpy(src + 500000, "BAD", 3);
    Diag *d = diag_new("f", src, n, NULL, 0);
    diag_error_range(d, (PlanLoc){1, 500001}, 3, "x");
    const char *t = diag_text(d);
    CHECK(strlen(t) < 600);
    /* "..." + 50 bytes before the caret, the caret under "BAD", "..." after the window */
    char want[1024];
    snprintf(want, sizeof want, "f:1:500001: error: x\n...%.50sBAD%.147s...\n%53s^~~\n", src, src, "");
    CHECK_STR(want, t);
    diag_free(d);
    /* at the ends of the line: only the side that was cut gets "..." */
    d = diag_new("f", src, n, NULL, 0);
    diag_error(d, (PlanLoc){1, 1}, "x");
    diag_error(d, (PlanLoc){1, (int)n}, "y");
    snprintf(want, sizeof want, "f:1:1: error: x\n%.200s...\n^\nf:1:%d: error: y\n...%.200s\n%202s^\n", src,
             (int)n, src, "");
    CHECK_STR(want, diag_text(d));
    diag_free(d);
    free(src);
}

/* A message is cut at 1 KiB (an 8 MB token quoted in it must not be printed whole). */
static void t_long_message_cut(void) {
    size_t n = 1 << 20;
    char *big = malloc(n + 1);
    CHECK(big != NULL);
    if (!big) return;
    memset(big, 'z', n);
    big[n] = 0;
    Diag *d = diag_new("f", SRC, strlen(SRC), NULL, 0);
    diag_error(d, (PlanLoc){4, 1}, "invalid integer '%s'", big);
    const char *t = diag_text(d);
    CHECK(strlen(t) < 1200);
    CHECK_CONTAINS(t, "zzz...\nlast\n^\n");
    diag_free(d);
    free(big);
}

int main(void) {
    TEST("diag/error_caret", {
        Diag *d = diag_new("ring.coll", SRC, strlen(SRC), NULL, 20);
        diag_error(d, (PlanLoc){2, 10}, "chunk %d out of range for buffer '%s' (%d chunks)", 9, "input", 8);
        CHECK_STR("ring.coll:2:10: error: chunk 9 out of range for buffer 'input' (8 chunks)\n"
                  "    copy(input[9], output[1])\n"
                  "         ^\n",
                  diag_text(d));
        CHECK_EQ_INT(1, diag_errors(d));
        CHECK_EQ_INT(0, diag_warnings(d));
        diag_free(d);
    });
    TEST("diag/error_range_tilde", {
        Diag *d = diag_new("ring.coll", SRC, strlen(SRC), NULL, 20);
        diag_error_range(d, (PlanLoc){2, 10}, 8, "bad");
        CHECK_STR("ring.coll:2:10: error: bad\n"
                  "    copy(input[9], output[1])\n"
                  "         ^~~~~~~~\n",
                  diag_text(d));
        diag_free(d);
    });
    TEST("diag/range_clamped_to_line", {
        Diag *d = diag_new("f", SRC, strlen(SRC), NULL, 0);
        diag_error_range(d, (PlanLoc){4, 3}, 50, "x");
        CHECK_STR("f:4:3: error: x\nlast\n  ^~\n", diag_text(d));
        diag_free(d);
    });
    TEST("diag/tab_copied_and_cr_dropped", {
        Diag *d = diag_new("f", SRC, strlen(SRC), NULL, 0);
        diag_warning(d, (PlanLoc){3, 4}, "unused '%s'", "x");
        CHECK_STR("f:3:4: warning: unused 'x'\n\tx = 1;\n\t  ^\n", diag_text(d));
        CHECK_EQ_INT(1, diag_warnings(d));
        CHECK_EQ_INT(0, diag_errors(d));
        diag_free(d);
    });
    TEST("diag/note_and_no_position", {
        Diag *d = diag_new("f", SRC, strlen(SRC), NULL, 0);
        diag_note(d, (PlanLoc){1, 9}, "'p' declared here");
        diag_error(d, (PlanLoc){0, 0}, "no main program");
        CHECK_STR("f:1:9: note: 'p' declared here\nprogram p {\n        ^\n"
                  "f: error: no main program\n",
                  diag_text(d));
        diag_free(d);
    });
    TEST("diag/line_outside_source", {
        Diag *d = diag_new("f", SRC, strlen(SRC), NULL, 0);
        diag_error(d, (PlanLoc){99, 1}, "far");
        CHECK_STR("f:99:1: error: far\n", diag_text(d));
        diag_free(d);
        d = diag_new(NULL, NULL, 0, NULL, 0);   /* no source, no name */
        diag_error(d, (PlanLoc){3, 2}, "x");
        CHECK_STR("<input>:3:2: error: x\n", diag_text(d));
        diag_free(d);
    });
    TEST("diag/column_past_end_of_line", {
        Diag *d = diag_new("f", "ab\n", 3, NULL, 0);
        diag_error(d, (PlanLoc){1, 7}, "expected ';'");
        CHECK_STR("f:1:7: error: expected ';'\nab\n  ^\n", diag_text(d));
        diag_free(d);
    });
    TEST("diag/utf8_columns", {
        const char *u = "x = \"\xc3\xa9t\xc3\xa9\" + y\n";   /* x = "été" + y */
        Diag *d = diag_new("u", u, strlen(u), NULL, 0);
        diag_error_range(d, (PlanLoc){1, 5}, 7, "string");   /* "été" is 7 bytes */
        diag_error(d, (PlanLoc){1, 14}, "y");
        CHECK_STR("u:1:5: error: string\nx = \"\xc3\xa9t\xc3\xa9\" + y\n    ^~~~~\n"
                  "u:1:14: error: y\nx = \"\xc3\xa9t\xc3\xa9\" + y\n           ^\n",
                  diag_text(d));
        diag_free(d);
    });
    TEST("diag/error_limit", {
        Diag *d = diag_new("f", SRC, strlen(SRC), NULL, 2);
        diag_error(d, (PlanLoc){1, 1}, "e1");
        diag_error(d, (PlanLoc){1, 1}, "e2");
        diag_error(d, (PlanLoc){1, 1}, "e3");
        diag_note(d, (PlanLoc){1, 1}, "n3");
        diag_error(d, (PlanLoc){1, 1}, "e4");
        const char *t = diag_text(d);
        CHECK_CONTAINS(t, "error: e1");
        CHECK_CONTAINS(t, "error: e2");
        CHECK(strstr(t, "e3") == NULL);
        CHECK(strstr(t, "n3") == NULL);
        CHECK(strstr(t, "e4") == NULL);
        CHECK_CONTAINS(t, "f: fatal error: too many errors emitted, stopping now [-ferror-limit=2]\n");
        CHECK_EQ_INT(3, diag_errors(d));   /* two shown and the one that stopped: nothing after */
        CHECK(diag_stopped(d));
        diag_free(d);
    });
    TEST("diag/long_line_window", t_long_line_window());
    TEST("diag/long_message_cut", t_long_message_cut());
    TEST("diag/stream_mode", {
        FILE *f = tmpfile();
        CHECK(f != NULL);
        if (f) {
            Diag *d = diag_new("g.coll", SRC, strlen(SRC), f, 20);
            diag_error(d, (PlanLoc){1, 1}, "boom %d", 7);
            CHECK_STR("", diag_text(d));
            rewind(f);
            char buf[256] = {0};
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = 0;
            CHECK_STR("g.coll:1:1: error: boom 7\nprogram p {\n^\n", buf);
            diag_free(d);
            fclose(f);
        }
    });
    TEST("diag/many_messages_collected", {
        Diag *d = diag_new("f", SRC, strlen(SRC), NULL, 0);
        for (int i = 0; i < 500; i++) diag_error(d, (PlanLoc){2, 5}, "error number %d", i);
        CHECK_EQ_INT(500, diag_errors(d));
        CHECK_CONTAINS(diag_text(d), "f:2:5: error: error number 499\n");
        CHECK_CONTAINS(diag_text(d), "f:2:5: error: error number 0\n");
        diag_free(d);
    });
    return harness_report();
}
