/*
 * main.c - the mscclc command: option parsing and file I/O around libmscclc (mscclc.h).
 *   mscclc PROGRAM.coll|- [-o PLAN.json] [-D NAME=VALUE]... [--target=mscclrt|mscclpp]
 *          [--no-fusion] [-ferror-limit=N] [--compact] [--time]
 *   mscclc --dump PLAN.json [--format=table|dot] [--summary]   (options in any order)
 *   mscclc --check PLAN.json   (the signal, limit, deadlock, race and handshake checks)
 * Exit status: 0 ok, 1 errors in the input, 2 usage or I/O error, 3 internal error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mscclc.h"
#include "plan.h"

static void usage(FILE *f) {
    fputs("usage: mscclc PROGRAM.coll [-o PLAN.json] [-D NAME=VALUE]... [--target=mscclrt|mscclpp]\n"
          "              [--no-fusion] [-ferror-limit=N] [--compact] [--time]\n"
          "       mscclc --dump PLAN.json [--format=table|dot] [--summary]\n"
          "       mscclc --check PLAN.json [-ferror-limit=N]\n"
          "       mscclc --version | --help\n",
          f);
}

/* --help: the usage, then one line per option (mscclc(1) OPTIONS lists the same options;
 * tests/cases/check_man.sh compares them). */
static void help(void) {
    static const char *const lines[][2] = {
        {"-o PLAN.json", "write the plan there instead of standard output (-o -: standard output)"},
        {"-D NAME=VALUE", "override 'param NAME' (an integer; K, M, G suffixes)"},
        {"--target=mscclrt|mscclpp", "the runtime the plan is for (default mscclrt; mscclpp "
                                     "applies MSCCL++'s 64 ops per thread block)"},
        {"--no-fusion", "do not fuse operations"},
        {"-ferror-limit=N", "stop after N errors (default 20; 0: no limit)"},
        {"--compact", "write the JSON without white space"},
        {"--time", "print the time of each stage on standard error"},
        {"--dump PLAN.json", "print a plan (any plan) instead of compiling"},
        {"--format=table|dot", "with --dump: a table (default) or a Graphviz digraph"},
        {"--summary", "with --dump: the header and one line per rank"},
        {"--check PLAN.json", "run the signal, limit, deadlock, race and handshake checks on a plan"},
        {"--version", "print the version"},
        {"--help", "print this help"},
    };
    usage(stdout);
    fputs("\nCompiles a .coll program (coll(5)) into an MSCCL++ execution plan.\n\n", stdout);
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        printf("  %-26s %s\n", lines[i][0], lines[i][1]);
}

static int usage_error(const char *fmt, const char *arg) {
    fputs("mscclc: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    usage(stderr);
    return 2;
}

/* Reads a whole file ("-" is standard input) of at most MSCCLC_MAX_INPUT bytes; NULL with errno
 * set on failure (EFBIG when the file is larger: reading stops there, so `mscclc /dev/zero` ends
 * at once instead of growing without bound). */
static char *read_file(const char *path, size_t *len) {
    bool in = strcmp(path, "-") == 0;
    FILE *f = in ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int err = buf ? 0 : ENOMEM;
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > MSCCLC_MAX_INPUT) {
            err = EFBIG;
            break;
        }
        if (n < cap) break;
        /* one byte past the limit is enough to know the input is too large */
        size_t ncap = cap * 2 > MSCCLC_MAX_INPUT + 1 ? MSCCLC_MAX_INPUT + 1 : cap * 2;
        char *nb = realloc(buf, ncap);
        if (!nb) {
            err = ENOMEM;
            break;
        }
        buf = nb;
        cap = ncap;
    }
    if (!err && ferror(f)) err = EIO;
    if (!in) fclose(f);
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    *len = n;
    return buf;
}

static bool parse_int(const char *s, int64_t *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno) return false;
    int shift = 0;
    if (*end == 'K') shift = 10, end++;
    else if (*end == 'M') shift = 20, end++;
    else if (*end == 'G') shift = 30, end++;
    if (*end) return false;
    if (shift && (v > (INT64_MAX >> shift) || v < (INT64_MIN >> shift))) return false;
    *out = (int64_t)((uint64_t)v << shift);
    return true;
}

static bool valid_name(const char *s, size_t n) {
    if (n == 0 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) return false;
    for (size_t i = 1; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

/* The plan file of --dump and --check; *rc its exit status when NULL. A path that does not exist
 * is a usage error (exit 2); anything else the loader judges, opening without blocking (an
 * fopen here would block forever on a FIFO). */
static Plan *load_plan(const char *path, int *rc) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "mscclc: cannot open '%s': %s\n", path, strerror(errno));
        *rc = 2;
        return NULL;
    }
    PlanErr err;
    Plan *p = plan_load_file(path, &err);
    if (!p) {
        fprintf(stderr, "%s\n", err.msg);
        *rc = 1;
    }
    return p;
}

static int dump(const char *path, const char *format, bool summary) {
    int rc = 0;
    Plan *p = load_plan(path, &rc);
    if (!p) return rc;
    if (strcmp(format, "dot") == 0) plan_dump_dot(p, stdout);
    else if (summary) plan_dump_summary(p, stdout);
    else plan_dump_table(p, stdout);
    plan_free(p);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "mscclc: cannot write the dump: %s\n", strerror(errno));
        return 2;
    }
    return 0;
}

/* --check: the compiler's final checks on a plan from any producer. */
static int check(const char *path, int error_limit) {
    int rc0 = 0;
    Plan *p = load_plan(path, &rc0);
    if (!p) return rc0;
    int errors = 0;
    int rc = mscclc_check_plan(p, path, stderr, error_limit, &errors);
    plan_free(p);
    if (rc < 0) {
        fputs("mscclc: out of memory\n", stderr);
        return 3;
    }
    if (errors > 0) {
        fprintf(stderr, "%d error%s generated.\n", errors, errors == 1 ? "" : "s");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *input = NULL, *output = NULL, *format = NULL;
    bool compact = false, timing = false, dumping = false, summary = false, checking = false;
    bool output_given = false;   /* -o, "-" (standard output) included */
    MscclcOptions opt = {0};
    MscclcDefine *defs = calloc((size_t)argc, sizeof *defs);
    char **names = calloc((size_t)argc, sizeof *names);
    int rc = 2;
    if (!defs || !names) {
        fputs("mscclc: out of memory\n", stderr);
        return 3;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-o") == 0) {
            if (++i == argc) return usage_error("%s needs a file name", a);
            output = strcmp(argv[i], "-") == 0 ? NULL : argv[i];   /* "-": standard output */
            output_given = true;
        } else if (strncmp(a, "-D", 2) == 0) {
            const char *d = a[2] ? a + 2 : (++i < argc ? argv[i] : NULL);
            if (!d) return usage_error("%s needs NAME=VALUE", "-D");
            const char *eq = strchr(d, '=');
            int64_t v;
            if (!eq || !valid_name(d, (size_t)(eq - d)) || !parse_int(eq + 1, &v))
                return usage_error("-D %s: expected NAME=INTEGER (suffixes K, M, G allowed)", d);
            names[opt.ndefines] = strndup(d, (size_t)(eq - d));
            if (!names[opt.ndefines]) return 3;
            defs[opt.ndefines].name = names[opt.ndefines];
            defs[opt.ndefines].value = v;
            opt.ndefines++;
        } else if (strcmp(a, "--no-fusion") == 0) {
            opt.no_fusion = true;
        } else if (strncmp(a, "-ferror-limit=", 14) == 0) {
            int64_t v;
            if (!parse_int(a + 14, &v) || v < 0 || v > 1000000) return usage_error("bad error limit '%s'", a + 14);
            opt.error_limit = v == 0 ? -1 : (int)v;
        } else if (strcmp(a, "--compact") == 0) {
            compact = true;
        } else if (strcmp(a, "--time") == 0) {
            timing = true;
        } else if (strcmp(a, "--dump") == 0) {
            /* a mode: the plan is the file operand, so options may come before or after it */
            dumping = true;
        } else if (strcmp(a, "--check") == 0) {
            checking = true;   /* a mode too */
        } else if (strcmp(a, "--summary") == 0) {
            summary = true;
        } else if (strncmp(a, "--format=", 9) == 0 || strcmp(a, "--format") == 0) {
            if (a[8] == '=') format = a + 9;
            else if (++i == argc) return usage_error("%s needs table or dot", a);
            else format = argv[i];
            if (strcmp(format, "table") != 0 && strcmp(format, "dot") != 0)
                return usage_error("unknown format '%s' (table or dot)", format);
        } else if (strncmp(a, "--target=", 9) == 0 || strcmp(a, "--target") == 0) {
            const char *t = a[8] == '=' ? a + 9 : ++i < argc ? argv[i] : NULL;
            if (!t) return usage_error("%s needs mscclrt or mscclpp", a);
            if (!plan_target_from_name(t, &opt.target))
                return usage_error("unknown target '%s' (mscclrt: libmscclrt, the default; mscclpp: "
                                   "MSCCL++'s executor)", t);
        } else if (strcmp(a, "--version") == 0) {
            puts(MSCCLC_PRODUCER);
            return 0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            help();
            return 0;
        } else if (a[0] == '-' && a[1]) {   /* "-" alone is standard input */
            return usage_error("unknown option '%s'", a);
        } else if (!input) {
            input = a;
        } else {
            return usage_error("more than one input file ('%s')", a);
        }
    }
    if (checking) {
        if (!input) return usage_error("%s", "--check needs a plan file");
        if (dumping || output_given || opt.ndefines || opt.target || format || summary)
            return usage_error("%s", "--check takes only a plan file and -ferror-limit");
        rc = check(input, opt.error_limit);
        goto out;
    }
    if (dumping) {
        if (!input) return usage_error("%s", "--dump needs a plan file");
        if (output_given || opt.ndefines || opt.target)
            return usage_error("%s", "--dump takes only a plan file, --format and --summary");
        if (summary && format && strcmp(format, "table") != 0)
            return usage_error("%s", "--summary is a form of the table, not of --format=dot");
        rc = dump(input, format ? format : "table", summary);
        goto out;
    }
    if (format || summary)
        return usage_error("%s applies to --dump only (mscclc --dump PLAN.json --format=dot)",
                           format ? "--format" : "--summary");
    if (!input) return usage_error("%s", "no input file");
    opt.defines = defs;
    opt.compact = compact;
    opt.filename = strcmp(input, "-") == 0 ? "<stdin>" : input;
    opt.diag_out = stderr;
    size_t len;
    char *src = read_file(input, &len);
    if (!src) {
        if (errno == EFBIG)
            fprintf(stderr, "mscclc: cannot read '%s': larger than the input limit of %zu bytes (64 MiB)\n",
                    input, MSCCLC_MAX_INPUT);
        else
            fprintf(stderr, "mscclc: cannot read '%s': %s\n", input, strerror(errno));
        goto out;
    }
    MscclcResult res;
    double t = 0;
    mscclc_compile(src, len, &opt, &res);
    for (int k = 0; k < 4; k++) t += res.seconds[k];
    if (res.errors > 0)
        fprintf(stderr, "%d error%s generated.\n", res.errors, res.errors == 1 ? "" : "s");
    rc = res.status == MSCCLC_OK ? 0 : res.status == MSCCLC_ERR_INPUT ? 1 : 3;
    if (rc == 0) {
        PlanErr err;
        if (output) {
            if (!plan_write_file(res.plan, output, compact, MSCCLC_PRODUCER, &err)) {
                fprintf(stderr, "mscclc: %s\n", err.msg);
                rc = 2;
            }
        } else {
            char *text = plan_to_json(res.plan, compact, MSCCLC_PRODUCER);
            if (!text) {
                fputs("mscclc: out of memory\n", stderr);
                rc = 3;
            } else {
                fputs(text, stdout);
                size_t n = strlen(text);
                if (n == 0 || text[n - 1] != '\n') fputc('\n', stdout);   /* as plan_write_file */
                if (fflush(stdout) != 0) {
                    fprintf(stderr, "mscclc: cannot write the plan: %s\n", strerror(errno));
                    rc = 2;
                }
                free(text);
            }
        }
    }
    if (timing)
        fprintf(stderr, "mscclc: %s: %.3f ms (parse %.3f, sema+lower %.3f, passes %.3f, validate %.3f)\n", input,
                t * 1e3, res.seconds[0] * 1e3, res.seconds[1] * 1e3, res.seconds[2] * 1e3, res.seconds[3] * 1e3);
    mscclc_result_free(&res);
    free(src);
out:
    for (int i = 0; i < opt.ndefines; i++) free(names[i]);
    free(names);
    free(defs);
    return rc;
}
