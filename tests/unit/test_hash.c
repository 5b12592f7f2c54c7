/*
 * test_hash.c - unit tests of the evaluator's hash tables (compiler/hash.c): NameMap insert,
 * lookup and removal (backward shift keeps every other name findable, through growth and with
 * colliding probe runs), and PosSet de-duplication of source positions.
 */
#include "hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"

static PlanLoc at(int line, int col) {
    PlanLoc p = {line, col};
    return p;
}

static void t_positions(void) {
    Arena *a = arena_new();
    PosSet *s = pos_new(a);
    CHECK(pos_add(s, at(0, 0)));
    CHECK(!pos_add(s, at(0, 0)));
    int fresh = 0, again = 0;
    for (int l = 1; l <= 300; l++)
        for (int c = 1; c <= 100; c++) fresh += pos_add(s, at(l, c));
    for (int l = 1; l <= 300; l++)
        for (int c = 1; c <= 100; c++) again += pos_add(s, at(l, c));
    CHECK_EQ_INT(30000, fresh);
    CHECK_EQ_INT(0, again);
    arena_free(a);
}

int main(void) {
    static char names[20000][16];
    for (int i = 0; i < 20000; i++) snprintf(names[i], sizeof names[i], "n%d", i);
    TEST("hash/names_put_get_grow", {
        Arena *a = arena_new();
        NameMap *m = names_new(a);
        for (int i = 0; i < 20000; i++) names_put(m, names[i], names[i]);
        int bad = 0;
        for (int i = 0; i < 20000; i++) bad += names_get(m, names[i]) != names[i];
        char copy[16];
        strcpy(copy, "n123");   /* found by content, not by pointer */
        CHECK(names_get(m, copy) == names[123]);
        CHECK(names_get(m, "nope") == NULL);
        CHECK_EQ_INT(0, bad);
        arena_free(a);
    });
    TEST("hash/names_remove_keeps_others", {
        Arena *a = arena_new();
        NameMap *m = names_new(a);
        for (int i = 0; i < 20000; i++) names_put(m, names[i], names[i]);
        for (int i = 0; i < 20000; i += 3) names_remove(m, names[i]);
        names_remove(m, "absent");
        int bad = 0;
        for (int i = 0; i < 20000; i++) bad += names_get(m, names[i]) != (i % 3 ? names[i] : NULL);
        CHECK_EQ_INT(0, bad);
        /* scopes open and close many times: the table never fills up */
        for (int round = 0; round < 1000; round++) {
            for (int i = 0; i < 20000; i += 3) names_put(m, names[i], names[i]);
            for (int i = 0; i < 20000; i += 3) names_remove(m, names[i]);
        }
        bad = 0;
        for (int i = 0; i < 20000; i++) bad += names_get(m, names[i]) != (i % 3 ? names[i] : NULL);
        CHECK_EQ_INT(0, bad);
        arena_free(a);
    });
    TEST("hash/positions", t_positions());
    return harness_report();
}
