/*
 * plan_escape.c - the one way a plan's strings (its name, collective, tags, any JSON text a
 * message quotes) are printed: they come from the file, so an escape sequence, a control
 * character or a byte that is not UTF-8 in them must reach no terminal or log as it is.
 * Used by the dump, the loader's and geometry's messages, the backends' messages and the commands.
 */
#include "plan.h"

#include <stdio.h>
#include <string.h>

#define PIECE_MAX 12                    /* the longest piece, "\u202e", and a NUL */

/* Unicode format controls that reorder or hide text on a terminal (bidirectional overrides,
 * isolates and marks, line and paragraph separators); C1 controls are handled with C0. */
static bool is_format_control(unsigned cp) {
    return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/* The printed form of the character at *sp, written to piece (NUL-terminated); advances *sp
 * past it. *sp must not be at the terminating NUL. */
static size_t next_piece(const unsigned char **sp, char piece[PIECE_MAX]) {
    const unsigned char *s = *sp;
    unsigned c = s[0];
    *sp = s + 1;
    switch (c) {
    case '\\': return (size_t)snprintf(piece, PIECE_MAX, "\\\\");
    case '\n': return (size_t)snprintf(piece, PIECE_MAX, "\\n");
    case '\r': return (size_t)snprintf(piece, PIECE_MAX, "\\r");
    case '\t': return (size_t)snprintf(piece, PIECE_MAX, "\\t");
    default: break;
    }
    if (c < 0x20 || c == 0x7f) return (size_t)snprintf(piece, PIECE_MAX, "\\x%02x", c);
    if (c < 0x80) {
        piece[0] = (char)c;
        piece[1] = 0;
        return 1;
    }
    /* UTF-8: the shortest form of a scalar value, else each byte is shown as \xNN. A NUL ends
     * a sequence early as any other non-continuation byte does, so nothing past it is read. */
    int len;
    unsigned cp, min;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07, min = 0x10000;
    else return (size_t)snprintf(piece, PIECE_MAX, "\\x%02x", c);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return (size_t)snprintf(piece, PIECE_MAX, "\\x%02x", c);
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return (size_t)snprintf(piece, PIECE_MAX, "\\x%02x", c);
    *sp = s + len;
    if (cp <= 0x9f || is_format_control(cp))    /* cp >= 0x80 here: a C1 control */
        return (size_t)snprintf(piece, PIECE_MAX, "\\u%04x", cp);
    memcpy(piece, s, (size_t)len);
    piece[len] = 0;
    return (size_t)len;
}

const char *plan_escape(char *buf, size_t n, const char *s) {
    if (!buf || n == 0) return "";
    if (!s) s = "(null)";
    const unsigned char *p = (const unsigned char *)s;
    size_t used = 0, cut = 0;              /* cut: the last end of a piece that leaves room for "..." */
    char piece[PIECE_MAX];
    while (*p) {
        size_t k = next_piece(&p, piece);
        if (used + k + 1 > n) {            /* does not fit: end at cut with "..." */
            used = cut;
            for (const char *d = "..."; *d && used + 1 < n; d++) buf[used++] = *d;
            break;
        }
        memcpy(buf + used, piece, k);
        used += k;
        if (used + 4 <= n) cut = used;
    }
    buf[used] = 0;
    return buf;
}

void plan_escape_fputs(const char *s, FILE *out) {
    if (!s) s = "(null)";
    const unsigned char *p = (const unsigned char *)s;
    char piece[PIECE_MAX];
    while (*p) {
        next_piece(&p, piece);
        fputs(piece, out);
    }
}
