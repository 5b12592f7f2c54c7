/*
 * main.c - the mscclc command: option parsing and file I/O around libmscclc (mscclc.h).
 *   mscclc PROGRAM.coll|- [-o PLAN.json] [-D NAME=VALUE]... [--no-fusion] [-ferror-limit=N]
 *          [--compact] [--time]
 *   mscclc --dump PLAN.json [--format=table|dot]
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
    fputs("usage: mscclc PROGRAM.coll [-o PLAN.json] [-D NAME=VALUE]... [--no-fusion]\n"
          "              [-ferror-limit=N] [--compact] [--time]\n"
          "       mscclc --dump PLAN.json [--format=table|dot]\n"
          "       mscclc --check PLAN.json\n"
          "       mscclc --version | --help\n",
          f);
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

static int dump(const char *path, const char *format) {
    /* a path that does not exist is a usage error (exit 2); anything else the loader judges,
     * opening without blocking (an fopen here would block forever on a FIFO) */
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "mscclc: cannot open '%s': %s\n", path, strerror(errno));
        return 2;
    }
    PlanErr err;
    Plan *p = plan_load_file(path, &err);
    if (!p) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (strcmp(format, "dot") == 0) plan_dump_dot(p, stdout);
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
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "mscclc: cannot open '%s': %s\n", path, strerror(errno));
        return 2;
    }
    PlanErr err;
    Plan *p = plan_load_file(path, &err);
    if (!p) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
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
    const char *input = NULL, *output = NULL, *dump_path = NULL, *check_path = NULL, *format = "table";
    bool compact = false, timing = false;
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
            output = argv[i];
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
            if (++i == argc) return usage_error("%s needs a plan file", a);
            dump_path = argv[i];
        } else if (strcmp(a, "--check") == 0) {
            if (++i == argc) return usage_error("%s needs a plan file", a);
            check_path = argv[i];
        } else if (strncmp(a, "--format=", 9) == 0) {
            format = a + 9;
            if (strcmp(format, "table") != 0 && strcmp(format, "dot") != 0)
                return usage_error("unknown format '%s' (table or dot)", format);
        } else if (strcmp(a, "--version") == 0) {
            puts(MSCCLC_PRODUCER);
            return 0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {   /* "-" alone is standard input */
            return usage_error("unknown option '%s'", a);
        } else if (!input) {
            input = a;
        } else {
            return usage_error("more than one input file ('%s')", a);
        }
    }
    if (check_path) {
        if (input || output || dump_path) return usage_error("%s", "--check takes only a plan file");
        rc = check(check_path, opt.error_limit);
        goto out;
    }
    if (dump_path) {
        if (input || output) return usage_error("%s", "--dump takes only a plan file and --format");
        rc = dump(dump_path, format);
        goto out;
    }
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
