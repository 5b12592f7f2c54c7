/*
 * ast.c - the compiler's arena allocator, the AST constructors used by the grammar actions, and
 * ast_parse(), which runs the reentrant flex scanner + bison parser over one source text.
 * Every AST node and string lives in the arena and dies with it (no per-node frees).
 */
#include "ast.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "parse.h"
#include "lex.h"

/* ---- arena: a list of blocks, bump allocation ---------------------------------------- */
typedef struct Block Block;
struct Block {
    Block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

struct Arena {
    Block *head;        /* current block (owned, with all older ones through ->next) */
    jmp_buf *oom;       /* where must() jumps when memory runs out (borrowed; NULL: none) */
};

void arena_on_oom(Arena *a, jmp_buf *env) {
    a->oom = env;
}

Arena *arena_new(void) {
    return calloc(1, sizeof(Arena));
}

void arena_free(Arena *a) {
    if (!a) return;
    for (Block *b = a->head, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    free(a);
}

void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    Block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 60000 ? n : 60000;
        b = malloc(sizeof(Block) + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
    char *d = arena_must(a, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *arena_printf(Arena *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *d = arena_must(a, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(d, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return d;
}

/* ---- constructors ---------------------------------------------------------------------- */
/* Allocation for code that cannot return an error (grammar actions, the evaluator): on failure it
 * jumps to the handler set by arena_on_oom (compile.c turns that into an internal error). */
void *arena_must(Arena *a, size_t n) {
    void *p = arena_alloc(a, n);
    if (!p) {
        if (a->oom) longjmp(*a->oom, 1);
        abort(); /* no handler installed: a programming error, never user input */
    }
    return p;
}
#define must arena_must

void ast_list_push(Arena *a, AstList *l, void *item) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        void **v = must(a, (size_t)cap * sizeof *v);
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = item;
}

Expr *ast_new_expr(Arena *a, ExprKind k, SrcLoc loc) {
    Expr *e = must(a, sizeof *e);
    e->kind = k;
    e->loc = loc;
    return e;
}

Expr *ast_new_int(Arena *a, SrcLoc loc, int64_t v) {
    Expr *e = ast_new_expr(a, EX_INT, loc);
    e->ival = v;
    return e;
}

Expr *ast_new_name(Arena *a, SrcLoc loc, const char *name) {
    Expr *e = ast_new_expr(a, EX_NAME, loc);
    e->name = name;
    return e;
}

Expr *ast_new_unary(Arena *a, SrcLoc loc, int op, Expr *x) {
    Expr *e = ast_new_expr(a, EX_UNARY, loc);
    e->op = op;
    e->a = x;
    return e;
}

Expr *ast_new_binary(Arena *a, SrcLoc loc, int op, Expr *x, Expr *y) {
    Expr *e = ast_new_expr(a, EX_BINARY, loc);
    e->op = op;
    e->a = x;
    e->b = y;
    return e;
}

Expr *ast_new_node(Arena *a, SrcLoc loc, ExprKind k, Expr *x, Expr *y, Expr *z) {
    Expr *e = ast_new_expr(a, k, loc);
    e->a = x;
    e->b = y;
    e->c = z;
    return e;
}

Iter *ast_new_iter(Arena *a, SrcLoc loc, const char *name, Expr *range) {
    Iter *it = must(a, sizeof *it);
    it->name = name;
    it->loc = loc;
    it->range = range;
    return it;
}

HeaderItem *ast_new_header(Arena *a, SrcLoc loc, const char *key) {
    HeaderItem *h = must(a, sizeof *h);
    h->key = key;
    h->loc = loc;
    return h;
}

Stmt *ast_new_stmt(Arena *a, StmtKind k, SrcLoc loc) {
    Stmt *s = must(a, sizeof *s);
    s->kind = k;
    s->loc = loc;
    return s;
}

void ast_lex_error(ParseState *ps, PlanLoc at) {
    AstProgram *p = ps->prog;
    if (p->nlex_errors == ps->cap_lex_errors) {
        int cap = ps->cap_lex_errors ? ps->cap_lex_errors * 2 : 8;
        PlanLoc *v = must(ps->arena, (size_t)cap * sizeof *v);
        if (p->nlex_errors) memcpy(v, p->lex_errors, (size_t)p->nlex_errors * sizeof *v);
        p->lex_errors = v;
        ps->cap_lex_errors = cap;
    }
    p->lex_errors[p->nlex_errors++] = at;
    ps->errors++;
}

/* ---- parse driver --------------------------------------------------------------------- */
int yyparse(yyscan_t scanner, ParseState *ps);

bool ast_parse(Arena *a, Diag *d, const char *src, size_t len, AstProgram *out) {
    ParseState ps = {.arena = a, .diag = d, .prog = out, .line = 1, .col = 1};
    memset(out, 0, sizeof *out);
    yyscan_t scanner;
    if (yylex_init_extra(&ps, &scanner) != 0) {
        diag_error(d, (PlanLoc){0, 0}, "cannot start the scanner (out of memory)");
        return false;
    }
    YY_BUFFER_STATE buf = yy_scan_bytes(src, (int)len, scanner);
    int rc = yyparse(scanner, &ps);
    yy_delete_buffer(buf, scanner);
    yylex_destroy(scanner);
    if (rc != 0 && ps.errors == 0) {
        diag_error(d, (PlanLoc){ps.line, ps.col}, "the parser ran out of memory");
        ps.errors++;
    }
    return ps.errors == 0;
}
