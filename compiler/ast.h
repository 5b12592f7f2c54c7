/*
 * ast.h - the syntax tree of a .coll program, built by the bison actions in grammar/coll.y and
 * consumed by sema.c/lower.c; plus the Arena every compiler allocation comes from (freed at once).
 * The tree is deliberately generic: calls, members, indexes and named arguments are plain
 * expressions, and sema gives them meaning (ops, chunk references, header values), so the
 * grammar stays small and every construct keeps its source position for diagnostics.
 */
#ifndef MSCCLC_AST_H
#define MSCCLC_AST_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* ---- arena ------------------------------------------------------------------------------ */
typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);                        /* frees every block; NULL is a no-op */
void *arena_alloc(Arena *a, size_t n);            /* zeroed, 16-byte aligned; NULL on OOM */
/* Like arena_alloc, but never NULL: on OOM it longjmps to the handler of arena_on_oom. */
void *arena_must(Arena *a, size_t n);
void arena_on_oom(Arena *a, jmp_buf *env);
char *arena_strndup(Arena *a, const char *s, size_t n);   /* never NULL (arena_must) */
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Source position with the width of the construct on its first line (for the ~ range). */
typedef struct {
    PlanLoc at;     /* line/col of the first byte, from 1 */
    int width;      /* bytes of the construct on that line (>= 1) */
} SrcLoc;

typedef struct Expr Expr;
typedef struct Stmt Stmt;

/* A growable array of pointers allocated from the arena (old storage is simply abandoned). */
typedef struct {
    void **v;
    int n, cap;
} AstList;

typedef enum {
    EX_INT,      /* ival */
    EX_STR,      /* str (unquoted, escapes resolved) */
    EX_NAME,     /* name */
    EX_UNARY,    /* op ('-', '!') a */
    EX_BINARY,   /* op (token code: '+', TK_EQ, ...) a b */
    EX_CALL,     /* a(args); a is usually EX_NAME or EX_MEMBER */
    EX_INDEX,    /* a[b] */
    EX_SLICE,    /* a[b:c] */
    EX_MEMBER,   /* a.name */
    EX_LIST,     /* [args...]; elements may be EX_RANGE (expanded) */
    EX_COMP,     /* [a for iters if cond] */
    EX_RANGE,    /* a .. b [step c]; b NULL = open end (header `sizes 1M ..`), a NULL = open start */
    EX_ARROW,    /* a -> b (channel endpoints) */
    EX_NAMED,    /* name = a (named argument) */
} ExprKind;

typedef struct {
    const char *name;
    SrcLoc loc;
    Expr *range;    /* EX_RANGE; any other expression is an error sema reports */
} Iter;

struct Expr {
    ExprKind kind;
    SrcLoc loc;
    int op;             /* EX_UNARY/EX_BINARY operator */
    int64_t ival;       /* EX_INT */
    const char *str;    /* EX_STR */
    const char *name;   /* EX_NAME, EX_MEMBER, EX_NAMED */
    Expr *a, *b, *c;    /* operands (see kind) */
    AstList args;       /* EX_CALL arguments, EX_LIST elements (Expr *) */
    AstList iters;      /* EX_COMP iterators (Iter *) */
    Expr *cond;         /* EX_COMP filter, may be NULL */
};

/* One header line inside `program NAME { ... }`: key followed by arguments. */
typedef struct {
    const char *key;
    SrcLoc loc;
    AstList args;       /* Expr * (EX_NAME words, EX_INT, EX_RANGE, EX_NAMED, calls) */
} HeaderItem;

typedef enum {
    ST_PARAM,      /* name = e */
    ST_REQUIRE,    /* e, msg (msg may be NULL) */
    ST_LET,        /* name = e */
    ST_PROGRAM,    /* name, header (HeaderItem *) */
    ST_SCRATCH,    /* name [e] */
    ST_CHANNEL,    /* target (EX_NAME or EX_INDEX chain) = e */
    ST_SEMAPHORE,  /* target = e */
    ST_FOR,        /* iters, e = filter (may be NULL), body */
    ST_IF,         /* e, body, orelse (may be empty) */
    ST_OP,         /* e (EX_CALL), place (may be NULL) */
    ST_PIPELINE,   /* e (EX_CALL pipeline(...)), body */
    ST_DEF,        /* def name(params) { body }: a function, expanded where it is called */
} StmtKind;

struct Stmt {
    StmtKind kind;
    SrcLoc loc;         /* the whole statement's start */
    const char *name;
    const char *msg;    /* ST_REQUIRE message */
    Expr *target;
    Expr *e;
    Expr *place;        /* `@ tb(t)` / `@ tbg(...)`: the EX_CALL after '@' */
    AstList iters;      /* ST_FOR: Iter * */
    AstList body;       /* Stmt * */
    AstList orelse;     /* Stmt * */
    AstList header;     /* HeaderItem * */
    AstList params;     /* ST_DEF: the parameters, Expr * (EX_NAME) */
};

typedef struct {
    AstList stmts;      /* top level, Stmt * */
    PlanLoc *lex_errors; /* positions of invalid tokens (their value is a placeholder) */
    int nlex_errors;
} AstProgram;

/* ---- constructors (grammar actions) ---------------------------------------------------------- */
void ast_list_push(Arena *a, AstList *l, void *item);
Expr *ast_new_expr(Arena *a, ExprKind k, SrcLoc loc);
Expr *ast_new_int(Arena *a, SrcLoc loc, int64_t v);
Expr *ast_new_name(Arena *a, SrcLoc loc, const char *name);
Expr *ast_new_unary(Arena *a, SrcLoc loc, int op, Expr *x);
Expr *ast_new_binary(Arena *a, SrcLoc loc, int op, Expr *x, Expr *y);
Expr *ast_new_node(Arena *a, SrcLoc loc, ExprKind k, Expr *x, Expr *y, Expr *z);
Iter *ast_new_iter(Arena *a, SrcLoc loc, const char *name, Expr *range);
HeaderItem *ast_new_header(Arena *a, SrcLoc loc, const char *key);
Stmt *ast_new_stmt(Arena *a, StmtKind k, SrcLoc loc);

/* ---- parser (grammar/coll.y + coll.l) -------------------------------------------------------- */
typedef struct Diag Diag;
/* Parses `src` (len bytes) into *out. Syntax errors go to `d` (several per run: the parser recovers
 * at statement level). Returns false when any syntax error was reported. */
bool ast_parse(Arena *a, Diag *d, const char *src, size_t len, AstProgram *out);

/* State shared by the scanner and the parser (the flex "extra" data). */
typedef struct {
    Arena *arena;
    Diag *diag;
    AstProgram *prog;
    int depth;          /* open ( and [ : newlines inside them are not statement ends */
    int line, col;      /* position of the next byte */
    int errors;         /* syntax + lexical errors reported */
    int cap_lex_errors; /* allocation of prog->lex_errors */
} ParseState;

/* Records the position of an invalid token (the scanner calls it after reporting). */
void ast_lex_error(ParseState *ps, PlanLoc at);

#endif
