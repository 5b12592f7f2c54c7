/*
 * diag.c - compiler diagnostics (diag.h): "path:line:col: error|warning|note: message", then the
 * source line and a caret line (`^~~~` under the range, tabs copied so the caret lines up).
 * Every stage reports through one Diag; past the error limit one fatal line is printed and
 * everything after it is suppressed (but still counted). With out == NULL the text is collected.
 */
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct Diag {
    const char *filename;   /* borrowed; "<input>" when NULL */
    const char *src;        /* borrowed source text, may be NULL */
    size_t len;             /* bytes of src */
    FILE *out;              /* NULL: collect into buf */
    int limit;              /* error limit; <= 0 means none */
    int errors, warnings;   /* all reported, including suppressed ones */
    bool stopped;           /* the limit was reached: print nothing more */
    char *buf;              /* collected text (out == NULL) */
    size_t blen, bcap;      /* used / allocated bytes of buf (excluding NUL) */
    bool oom;               /* collection ran out of memory; text is truncated */
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

/* Finds line `line` (from 1) of the source: start pointer and length without the newline
 * (a trailing '\r' is dropped too). false when the source has no such line. */
static bool find_line(const Diag *d, int line, const char **start, size_t *n) {
    if (!d->src || line < 1) return false;
    const char *p = d->src, *end = d->src + d->len;
    for (int l = 1; l < line; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return false;
        p = nl + 1;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t k = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (k > 0 && p[k - 1] == '\r') k--;
    *start = p;
    *n = k;
    return true;
}

/* The source line and the caret line under column `col` spanning `width` bytes. */
static void emit_snippet(Diag *d, PlanLoc loc, int width) {
    const char *line;
    size_t n;
    if (loc.line < 1 || !find_line(d, loc.line, &line, &n)) return;
    emit(d, "%.*s\n", (int)n, line);
    size_t col = loc.col >= 1 ? (size_t)loc.col - 1 : 0;
    if (col > n) col = n;   /* a position at the end of the line (e.g. a missing token) */
    /* one blank per character: UTF-8 continuation bytes take no column on screen */
    for (size_t i = 0; i < col; i++)
        if (((unsigned char)line[i] & 0xC0) != 0x80) emit(d, "%c", line[i] == '\t' ? '\t' : ' ');
    emit(d, "^");
    size_t w = width > 1 ? (size_t)width : 1;
    if (col + w > n) w = n > col ? n - col : 1;   /* never run past the line */
    for (size_t i = 1; i < w; i++)
        if (((unsigned char)line[col + i] & 0xC0) != 0x80) emit(d, "~");
    emit(d, "\n");
}

typedef enum { SEV_ERROR, SEV_WARNING, SEV_NOTE } Severity;

static void report(Diag *d, Severity sev, PlanLoc loc, int width, const char *fmt, va_list ap) {
    if (!d) return;
    if (sev == SEV_ERROR) d->errors++;
    if (sev == SEV_WARNING) d->warnings++;
    if (d->stopped) return;
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
    emitv(d, fmt, ap);
    emit(d, "\n");
    emit_snippet(d, loc, width);
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

int diag_errors(const Diag *d) {
    return d ? d->errors : 0;
}

int diag_warnings(const Diag *d) {
    return d ? d->warnings : 0;
}

const char *diag_text(const Diag *d) {
    return d && !d->out && d->buf ? d->buf : "";
}
