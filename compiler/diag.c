/*
 * diag.c - compiler diagnostics (diag.h): "path:line:col: error|warning|note: message", then the
 * source line and a caret line (`^~~~` under the range, tabs copied so the caret lines up).
 * Every stage reports through one Diag; past the error limit one fatal line is printed, nothing
 * more is reported and diag_stopped() tells the stages to stop. With out == NULL the text is
 * collected. Output is bounded per diagnostic: a message of at most DIAG_MAX_MESSAGE bytes and a
 * window of at most DIAG_MAX_SNIPPET columns of the source line around the caret.
 */
#include "diag.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define DIAG_MAX_MESSAGE 1024   /* bytes of one message; longer ones end in "..." */
#define DIAG_MAX_SNIPPET 200    /* bytes of a source line shown around the caret */

struct Diag {
    const char *filename;   /* borrowed; "<input>" when NULL */
    const char *src;        /* borrowed source text, may be NULL */
    size_t len;             /* bytes of src */
    FILE *out;              /* NULL: collect into buf */
    int limit;              /* error limit; <= 0 means none */
    int errors, warnings;   /* reported so far, the one that hit the limit included */
    bool stopped;           /* the limit was reached: report and count nothing more */
    size_t *lines;          /* start offset of each source line, built on the first snippet */
    int nlines;             /* entries of lines; 0 = not built yet */
    char *buf;              /* collected text (out == NULL) */
    size_t blen, bcap;      /* used / allocated bytes of buf (excluding NUL) */
    bool oom;               /* collection ran out of memory; text is truncated */
    struct CallSite { PlanLoc stmt, call; const char *fn; } *sites;  /* owned; diag_add_call_site */
    int nsites, capsites;
    bool call_notes;        /* errors at recorded statements get a note at their call */
};

Diag *diag_new(const char *filename, const char *source, size_t len, FILE *out, int error_limit) {
    Diag *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->filename = filename ? filename : "<input>";
    d->src = source;
    d->len = source ? len : 0;
    d->out = out;
    d->limit = error_limit;
    return d;
}

void diag_free(Diag *d) {
    if (!d) return;
    free(d->sites);
    free(d->lines);
    free(d->buf);
    free(d);
}

/* Appends formatted text to the sink (the stream, or the collection buffer). */
static void emitv(Diag *d, const char *fmt, va_list ap) {
    if (d->out) {
        vfprintf(d->out, fmt, ap);
        return;
    }
    if (d->oom) return;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0) return;
    if (d->blen + (size_t)n + 1 > d->bcap) {
        size_t cap = d->bcap ? d->bcap : 256;
        while (cap < d->blen + (size_t)n + 1) cap *= 2;
        char *b = realloc(d->buf, cap);
        if (!b) {
            d->oom = true;
            return;
        }
        d->buf = b;
        d->bcap = cap;
    }
    vsnprintf(d->buf + d->blen, (size_t)n + 1, fmt, ap);
    d->blen += (size_t)n;
}

static void emit(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(Diag *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emitv(d, fmt, ap);
    va_end(ap);
}

/* Indexes the start of every source line once, so each snippet costs O(log lines + its own
 * length), not a scan from the top of the file. false when out of memory. */
static bool index_lines(Diag *d) {
    if (d->nlines > 0) return true;
    size_t n = 1;
    for (const char *p = d->src, *end = d->src + d->len; (p = memchr(p, '\n', (size_t)(end - p))); p++) n++;
    if (n > (size_t)INT_MAX) return false;
    d->lines = malloc(n * sizeof *d->lines);
    if (!d->lines) return false;
    d->lines[0] = 0;
    int k = 1;
    for (const char *p = d->src, *end = d->src + d->len; (p = memchr(p, '\n', (size_t)(end - p))); p++)
        d->lines[k++] = (size_t)(p - d->src) + 1;
    d->nlines = k;
    return true;
}

/* Finds line `line` (from 1) of the source: start pointer and length without the newline
 * (a trailing '\r' is dropped too). false when the source has no such line. */
static bool find_line(Diag *d, int line, const char **start, size_t *n) {
    if (!d->src || line < 1 || !index_lines(d) || line > d->nlines) return false;
    const char *p = d->src + d->lines[line - 1], *end = d->src + d->len;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t k = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (k > 0 && p[k - 1] == '\r') k--;
    *start = p;
    *n = k;
    return true;
}

static bool utf8_cont(char c) {
    return ((unsigned char)c & 0xC0) == 0x80;
}

/* The source line and the caret line under column `col` spanning `width` bytes. A line longer
 * than DIAG_MAX_SNIPPET shows only a window of that many bytes around the caret, with "..." on
 * the sides that were cut. */
static void emit_snippet(Diag *d, PlanLoc loc, int width) {
    const char *line;
    size_t n;
    if (loc.line < 1 || !find_line(d, loc.line, &line, &n)) return;
    size_t col = loc.col >= 1 ? (size_t)loc.col - 1 : 0;
    if (col > n) col = n;   /* a position at the end of the line (e.g. a missing token) */
    size_t lo = 0, hi = n;
    if (n > DIAG_MAX_SNIPPET) {
        lo = col > DIAG_MAX_SNIPPET / 4 ? col - DIAG_MAX_SNIPPET / 4 : 0;
        if (lo + DIAG_MAX_SNIPPET > n) lo = n - DIAG_MAX_SNIPPET;
        while (lo > 0 && utf8_cont(line[lo])) lo--;   /* never start inside a character */
        hi = lo + DIAG_MAX_SNIPPET;
        while (hi < n && utf8_cont(line[hi])) hi++;
    }
    const char *pre = lo > 0 ? "..." : "";
    emit(d, "%s%.*s%s\n", pre, (int)(hi - lo), line + lo, hi < n ? "..." : "");
    char caret[2 * DIAG_MAX_SNIPPET + 16];   /* "   " + the window's columns + "^~~~" */
    size_t k = 0;
    if (lo > 0) k += (size_t)snprintf(caret, sizeof caret, "   ");
    /* one blank per character: UTF-8 continuation bytes take no column on screen */
    for (size_t i = lo; i < col; i++)
        if (!utf8_cont(line[i])) caret[k++] = line[i] == '\t' ? '\t' : ' ';
    caret[k++] = '^';
    size_t w = width > 1 ? (size_t)width : 1;
    if (col + w > hi) w = hi > col ? hi - col : 1;   /* never run past the line or the window */
    for (size_t i = 1; i < w; i++)
        if (!utf8_cont(line[col + i])) caret[k++] = '~';
    emit(d, "%.*s\n", (int)k, caret);
}

typedef enum { SEV_ERROR, SEV_WARNING, SEV_NOTE } Severity;

static void report(Diag *d, Severity sev, PlanLoc loc, int width, const char *fmt, va_list ap) {
    if (!d || d->stopped) return;
    if (sev == SEV_ERROR) d->errors++;
    if (sev == SEV_WARNING) d->warnings++;
    if (sev == SEV_ERROR && d->limit > 0 && d->errors > d->limit) {
        emit(d, "%s: fatal error: too many errors emitted, stopping now [-ferror-limit=%d]\n",
             d->filename, d->limit);
        d->stopped = true;
        return;
    }
    static const char *const names[] = {"error", "warning", "note"};
    if (loc.line >= 1)
        emit(d, "%s:%d:%d: %s: ", d->filename, loc.line, loc.col >= 1 ? loc.col : 1, names[sev]);
    else
        emit(d, "%s: %s: ", d->filename, names[sev]);
    char msg[DIAG_MAX_MESSAGE];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    emit(d, "%s%s\n", msg, n >= (int)sizeof msg ? "..." : "");
    emit_snippet(d, loc, width);
    if (sev != SEV_ERROR || !d->call_notes || loc.line < 1) return;
    for (int i = 0; i < d->nsites; i++)
        if (d->sites[i].stmt.line == loc.line && d->sites[i].stmt.col == loc.col) {
            PlanLoc at = d->sites[i].call;
            emit(d, "%s:%d:%d: note: in the call of '%s'\n", d->filename, at.line,
                 at.col >= 1 ? at.col : 1, d->sites[i].fn);
            emit_snippet(d, at, 1);
            return;
        }
}

void diag_add_call_site(Diag *d, PlanLoc stmt, PlanLoc call, const char *fn) {
    if (!d || stmt.line < 1) return;
    if (d->nsites == d->capsites) {
        int cap = d->capsites ? 2 * d->capsites : 16;
        struct CallSite *n = realloc(d->sites, (size_t)cap * sizeof *n);
        if (!n) return;   /* only a note is lost */
        d->sites = n;
        d->capsites = cap;
    }
    d->sites[d->nsites++] = (struct CallSite){stmt, call, fn};
}

void diag_call_notes_on(Diag *d) {
    if (d) d->call_notes = true;
}

void diag_error(Diag *d, PlanLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(d, SEV_ERROR, loc, 1, fmt, ap);
    va_end(ap);
}

void diag_warning(Diag *d, PlanLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(d, SEV_WARNING, loc, 1, fmt, ap);
    va_end(ap);
}

void diag_note(Diag *d, PlanLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(d, SEV_NOTE, loc, 1, fmt, ap);
    va_end(ap);
}

void diag_error_range(Diag *d, PlanLoc loc, int width, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(d, SEV_ERROR, loc, width, fmt, ap);
    va_end(ap);
}

bool diag_stopped(const Diag *d) {
    return d && d->stopped;
}

int diag_errors(const Diag *d) {
    return d ? d->errors : 0;
}

int diag_warnings(const Diag *d) {
    return d ? d->warnings : 0;
}

const char *diag_text(const Diag *d) {
    return d && !d->out && d->buf ? d->buf : "";
}
