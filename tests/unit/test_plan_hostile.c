/*
 * test_plan_hostile.c - the hostile plan corpus tests/plans/hostile/: every NAME.json must be
 * rejected, from a file and from memory, with a message containing each line of NAME.expect,
 * and without crashing (the suite also runs under ASan/UBSan with make test-sanitize).
 */
#include "../harness.h"
#include "test_plan_util.h"

#include <dirent.h>

#define HOSTILE_DIR "tests/plans/hostile/"

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_one(const char *name) {
    char path[512], exp_path[512];
    snprintf(path, sizeof path, HOSTILE_DIR "%s.json", name);
    snprintf(exp_path, sizeof exp_path, HOSTILE_DIR "%s.expect", name);
    char *expect = tp_read_file(exp_path, NULL);
    CHECK(expect != NULL);
    PlanErr e;
    Plan *p = plan_load_file(path, &e);
    CHECK(p == NULL);
    plan_free(p);
    CHECK(strncmp(e.msg, path, strlen(path)) == 0); /* messages name the file */
    size_t len;
    char *text = tp_read_file(path, &len);
    PlanErr m;
    Plan *q = text ? plan_parse(text, len, "mem", &m) : NULL;
    CHECK(text != NULL && q == NULL);
    plan_free(q);
    /* the same message apart from the name */
    CHECK_STR(e.msg + strlen(path), m.msg + 3);
    for (char *line = expect, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (*line) CHECK_CONTAINS(e.msg, line);
    }
    free(text);
    free(expect);
}

int main(void) {
    DIR *d = opendir(HOSTILE_DIR);
    if (!d) {
        fprintf(stderr, "cannot open " HOSTILE_DIR " (run from the repo root)\n");
        return 1;
    }
    char *names[512];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 512;) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".json") == 0) names[n++] = strndup(de->d_name, l - 5);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(n >= 25);
    for (int i = 0; i < n; i++) {
        char title[300];
        snprintf(title, sizeof title, "plan_hostile/%s", names[i]);
        TEST(title, check_one(names[i]));
        free(names[i]);
    }
    return harness_report();
}
