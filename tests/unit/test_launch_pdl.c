/*
 * test_launch_pdl.c - programmatic dependent launch (runtime/exec/exec_pdl.c,
 * MSCCLRT_LAUNCH_PDL): the rule that turns it on (the parameter, sm_90 and later, a driver with
 * cuLaunchKernelEx, no other rank on the GPU); the launch structures cuda_driver.h restates,
 * pinned to the numbers test_launch_cuabi.c checks in <cuda.h>; and the promise that makes such launches
 * safe: every kernel libmscclrt launches begins with mk::launch_prologue (the generated plan
 * kernels and every __global__ function of kernels/, which may only load the context and the
 * peer-memory table before it), so nothing a kernel does with what an earlier kernel writes
 * comes before its wait for the previous kernel on the stream.
 */
#include "codegen/codegen.h"
#include "core/err.h"
#include "cuda/cuda_driver.h"
#include "exec/exec.h"
#include "plan.h"
#include "test_plan_util.h"
#include "../harness.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuda_driver.h's restatement of the launch structures, pinned to the numbers that
 * test_launch_cuabi.c checks against the real <cuda.h> */
_Static_assert(sizeof(CuLaunchAttr) == 72 && offsetof(CuLaunchAttr, value) == 8, "CUlaunchAttribute");
_Static_assert(sizeof(CuLaunchConfig) == 56 && offsetof(CuLaunchConfig, smem) == 24 &&
                   offsetof(CuLaunchConfig, stream) == 32 && offsetof(CuLaunchConfig, attrs) == 40 &&
                   offsetof(CuLaunchConfig, nattrs) == 48, "CUlaunchConfig");
_Static_assert(CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION == 6, "attribute id");
_Static_assert(CU_ATTR_PCI_BUS_ID == 33 && CU_ATTR_PCI_DEVICE_ID == 34 && CU_ATTR_PCI_DOMAIN_ID == 50,
               "PCI location attributes");

static void t_rule(void) {
    CHECK(exec_pdl_wanted(1, 9, true, false));
    CHECK(exec_pdl_wanted(1, 10, true, false));
    CHECK(!exec_pdl_wanted(0, 9, true, false));    /* MSCCLRT_LAUNCH_PDL=0 */
    CHECK(!exec_pdl_wanted(1, 8, true, false));    /* no griddepcontrol before sm_90 */
    CHECK(!exec_pdl_wanted(1, 0, true, false));    /* capability unknown */
    CHECK(!exec_pdl_wanted(1, 9, false, false));   /* driver without cuLaunchKernelEx */
    CHECK(!exec_pdl_wanted(1, 9, true, true));     /* another rank on this GPU */
}

/* the first statement of the function body that starts at text[open] ('{') */
static const char *first_statement(const char *open) {
    const char *p = open + 1;
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

/* p past blanks and comments */
static const char *skip_comments(const char *p) {
    for (;;) {
        while (*p && isspace((unsigned char)*p)) p++;
        if (strncmp(p, "/*", 2) != 0) return p;
        const char *e = strstr(p, "*/");
        if (!e) return p + strlen(p);
        p = e + 2;
    }
}

/* Whether the function body at open begins with mk::launch_prologue(), before which it may only
 * declare what loads what no earlier kernel writes: `const mn::Ctx`, `const mn::PmAhead` and
 * `const bool` of them (statements that use nothing else of mn:: or mk::). A body whose first
 * statement calls a helper of file (p2p_kernel) is checked by the helper's body. */
static bool body_starts_with_prologue(const char *open, const char *file) {
    const char *p = first_statement(open);
    const char *pro = strstr(p, "mk::launch_prologue();");
    const char *close = strstr(p, "\n}");
    if (pro && (!close || pro < close)) {
        for (const char *st = skip_comments(p); st < pro; st = skip_comments(st)) {
            const char *semi = strchr(st, ';');
            if (!semi || semi > pro) return false;
            size_t skip;
            if (strncmp(st, "const mn::Ctx ", 14) == 0) skip = 14;
            else if (strncmp(st, "const mn::PmAhead ", 18) == 0) skip = 18;
            else if (strncmp(st, "const bool ", 11) == 0) skip = 11;
            else return false;
            const char *m = strstr(st + skip, "mn::"), *k = strstr(st, "mk::");
            if ((m && m < semi) || (k && k < semi)) return false;
            st = semi + 1;
        }
        return true;
    }
    /* the body hands on to one helper (p2p_kernel) first */
    const char *paren = strchr(p, '(');
    if (!paren || (close && paren > close) || paren - p > 40) return false;
    char name[64];
    snprintf(name, sizeof name, "void %.*s(", (int)(paren - p), p);
    const char *def = strstr(file, name);
    const char *hb = def ? strchr(def, '{') : NULL;
    return hb && hb != open && body_starts_with_prologue(hb, file);
}

/* every __global__ function of a kernel file begins with the prologue; returns how many */
static int check_kernel_file(const char *path) {
    char *s = tp_read_file(path, NULL);
    CHECK(s != NULL);
    if (!s) return 0;
    int n = 0;
    for (const char *g = strstr(s, "__global__"); g; g = strstr(g + 1, "__global__")) {
        const char *line = g;
        while (line > s && line[-1] != '\n') line--;
        const char *t = line;
        while (*t == ' ') t++;
        if (t[0] == '*' || (t[0] == '/' && (t[1] == '*' || t[1] == '/'))) continue;   /* prose */
        const char *open = strchr(g, '{');
        CHECK(open != NULL);
        if (!open) break;
        n++;
        if (!body_starts_with_prologue(open, s)) {
            char name[96];
            snprintf(name, sizeof name, "%.*s", (int)(open - g < 95 ? open - g : 95), g);
            fprintf(stderr, "%s: a kernel without mk::launch_prologue first: %s\n", path, name);
            CHECK(body_starts_with_prologue(open, s));
        }
    }
    free(s);
    return n;
}

static void t_kernel_files(void) {
    int n = check_kernel_file("kernels/native_builtin.cuh");
    CHECK_EQ_INT(3, n);   /* mscclrt_native_coll, _p2p, _p2p_small */
    CHECK_EQ_INT(1, check_kernel_file("kernels/native_direct.cuh"));
    /* the prologue itself: the wait comes before the trigger, both only on sm_90 and later */
    char *s = tp_read_file("kernels/mk_sync.cuh", NULL);
    CHECK(s != NULL);
    const char *f = s ? strstr(s, "void launch_prologue()") : NULL;
    CHECK(f != NULL);
    if (f) {
        const char *arch = strstr(f, "__CUDA_ARCH__ >= 900"), *w = strstr(f, "griddepcontrol.wait"),
                   *l = strstr(f, "griddepcontrol.launch_dependents");
        CHECK(arch && w && l && arch < w && w < l);
    }
    free(s);
}

static void t_generated(void) {
    static const char *const plans[] = {"allreduce_packet", "allreduce", "reduce_pack"};
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        char path[256];
        snprintf(path, sizeof path, COMPAT_DIR "%s.json", plans[i]);
        PlanErr err;
        Plan *p = plan_load_file(path, &err);
        CHECK(p != NULL);
        if (!p) continue;
        char *src = NULL;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, cg_generate(p, 0, MSCCLRT_FLOAT16, MSCCLRT_SUM, MSCCLRT_LL16, &src));
        const char *g = src ? strstr(src, "__global__") : NULL;
        CHECK(g != NULL);
        const char *open = g ? strchr(g, '{') : NULL;
        CHECK(open && strncmp(first_statement(open), "mk::launch_prologue();", 22) == 0);
        CHECK(!g || !strstr(g + 1, "__global__"));   /* one kernel per source */
        free(src);
        plan_free(p);
    }
}

int main(void) {
    TEST("launch pdl: the rule", t_rule());
    TEST("launch pdl: every built-in kernel begins with the prologue", t_kernel_files());
    TEST("launch pdl: every generated kernel begins with the prologue", t_generated());
    return harness_report();
}
