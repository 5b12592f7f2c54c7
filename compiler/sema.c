/*
 * sema.c - executes a .coll program at compile time: name resolution and scopes, evaluation of
 * params (with -D overrides), lets, loops with filters, ifs and requires, the program header,
 * scratch/channel/semaphore declarations and chunk references with their range checks. Op
 * statements are handed to lower.c. Every error is located; one error per source position.
 */
#include "sema.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"   /* token codes of binary operators */

#define SEMA_MAX_ITERATIONS 20000000   /* all loop iterations of one compile */

typedef enum {
    SYM_VALUE,      /* let or loop variable: v */
    SYM_PARAM,      /* param: v (V_INT) */
    SYM_SCRATCH,    /* scratch declaration: scratch (index into Sema.scratch) */
    SYM_CHANARR,    /* channel array (ndims subscripts; 0 = scalar) */
    SYM_SEMARR,     /* semaphore array */
    SYM_FUNC,       /* def: fn */
} SymKind;

struct Symbol {
    SymKind kind;
    const char *name;
    SrcLoc loc;             /* declaration */
    Value v;
    int scratch;
    int ndims;              /* arrays: subscripts per element */
    bool loop_var;          /* SYM_VALUE bound by a for/comprehension iterator */
    const Stmt *fn;         /* SYM_FUNC: its ST_DEF */
    Symbol *next_free;      /* in Sema.free_syms once its scope ended */
};

/* ---- array elements: open addressing over (symbol, subscripts) ----------------------- */
typedef struct {
    Symbol *sym;            /* NULL = empty slot */
    int64_t idx[SEMA_MAX_DIMS];
    void *elem;             /* Channel * or Semaphore * */
    SrcLoc loc;             /* declaration of the element */
} Elem;

struct ElemTable {
    Elem *slots;
    size_t cap, used;
};

static uint64_t elem_hash(const Symbol *sym, const int64_t *idx, int n) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)sym;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)idx[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    /* murmur3's finaliser: the slot is taken from the low bits, which the loop mixes poorly
     * (dense subscripts clustered into long probe runs) */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static Elem *elem_find(Sema *s, const Symbol *sym, const int64_t *idx, int n, bool insert) {
    ElemTable *t = s->elems;
    if (insert && (t->used + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        Elem *slots = arena_must(s->arena, cap * sizeof *slots);
        for (size_t i = 0; i < t->cap; i++) {
            Elem *e = &t->slots[i];
            if (!e->sym) continue;
            size_t j = elem_hash(e->sym, e->idx, e->sym->ndims) & (cap - 1);
            while (slots[j].sym) j = (j + 1) & (cap - 1);
            slots[j] = *e;
        }
        t->slots = slots;
        t->cap = cap;
    }
    if (t->cap == 0) return NULL;
    size_t j = elem_hash(sym, idx, n) & (t->cap - 1);
    for (;;) {
        Elem *e = &t->slots[j];
        if (!e->sym) {
            if (!insert) return NULL;
            e->sym = (Symbol *)sym;
            memcpy(e->idx, idx, (size_t)n * sizeof *idx);
            t->used++;
            return e;
        }
        if (e->sym == sym && memcmp(e->idx, idx, (size_t)n * sizeof *idx) == 0) return e;
        j = (j + 1) & (t->cap - 1);
    }
}

/* A function call being expanded: the function and where it was called. */
struct CallFrame {
    const Stmt *fn;         /* ST_DEF */
    SrcLoc loc;             /* the call */
};

/* ---- diagnostics ------------------------------------------------------------------------ */
bool sema_error(Sema *s, SrcLoc loc, const char *fmt, ...) {
    if (!pos_add(s->reported, loc.at)) return false;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error_range(s->diag, loc.at, loc.width, "%s", msg);
    /* inside loops, say which iteration failed first (later ones are not reported again) */
    int len = 0;
    const Symbol *inner = NULL;
    for (int i = 0; i < s->nloops && len < (int)sizeof msg - 40; i++) {
        const Symbol *v = s->loops[i];
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s = %" PRId64, len ? ", " : "", v->name, v->v.i);
        inner = v;
    }
    if (inner) diag_note(s->diag, inner->loc.at, "in the iteration with %s", msg);
    /* inside functions, where each was called from (innermost first) */
    for (int i = s->ncalls - 1; i >= 0; i--)
        diag_note(s->diag, s->calls[i].loc.at, "in the call of '%s'", s->calls[i].fn->name);
    return true;
}

bool sema_charge(Sema *s, SrcLoc loc, int64_t *count, int64_t n, int64_t limit, const char *what,
                 const char *whose) {
    int64_t k = s->instances > 1 ? s->instances : 1;
    if (n <= (limit - *count) / k) {
        *count += n * k;
        return true;
    }
    char inst[64] = "";
    if (k > 1) snprintf(inst, sizeof inst, " (%d instances of the program)", (int)k);
    sema_error(s, loc, "the plan would have more than %" PRId64 " %s%s, %s", limit, what, inst, whose);
    s->stopped = true;
    return false;
}

bool sema_halted(Sema *s) {
    if (!s->stopped && diag_stopped(s->diag)) s->stopped = true;
    return s->stopped;
}

static void sema_note(Sema *s, SrcLoc loc, const char *what) {
    if (loc.at.line > 0) diag_note(s->diag, loc.at, "%s", what);
}

/* ---- scopes -------------------------------------------------------------------------------- */
static Symbol *lookup(Sema *s, const char *name) {
    return names_get(s->names, name);
}

static void push_sym(Sema *s, Symbol ***v, int *n, int *cap, Symbol *sym) {
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 32;
        Symbol **nv = arena_must(s->arena, (size_t)c * sizeof *nv);
        if (*n) memcpy(nv, *v, (size_t)*n * sizeof *nv);
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = sym;
}

/* Ends the bindings above `mark`: their names leave the table and the symbols are reused. */
static void pop_scope(Sema *s, int mark) {
    while (s->nscope > mark) {
        Symbol *sym = s->scopes[--s->nscope];
        names_remove(s->names, sym->name);
        sym->next_free = s->free_syms;
        s->free_syms = sym;
    }
}

/* Declares `name`; a name may not be redeclared while the earlier one is visible. Globals (params,
 * scratch, arrays) stay visible after the block that declared them ends. */
static Symbol *declare_in(Sema *s, SymKind k, const char *name, SrcLoc loc, bool global) {
    Symbol *old = lookup(s, name);
    if (old) {
        if (sema_error(s, loc, "redefinition of '%s'", name))
            sema_note(s, old->loc, "previous declaration is here");
        return NULL;
    }
    Symbol *sym = global ? NULL : s->free_syms;
    if (sym) {
        s->free_syms = sym->next_free;
        memset(sym, 0, sizeof *sym);
    } else {
        sym = arena_must(s->arena, sizeof *sym);
    }
    sym->kind = k;
    sym->name = name;
    sym->loc = loc;
    sym->ndims = -1;
    names_put(s->names, name, sym);
    if (!global) push_sym(s, &s->scopes, &s->nscope, &s->capscope, sym);
    return sym;
}

static Symbol *declare(Sema *s, SymKind k, const char *name, SrcLoc loc) {
    return declare_in(s, k, name, loc, false);
}

static Symbol *declare_global(Sema *s, SymKind k, const char *name, SrcLoc loc) {
    return declare_in(s, k, name, loc, true);
}

/* ---- values -------------------------------------------------------------------------------- */
static const char *kind_name(ValueKind k) {
    switch (k) {
    case V_INT: return "an integer";
    case V_STR: return "a string";
    case V_LIST: return "a list";
    case V_RANGE: return "a range";
    case V_RANK: return "a rank";
    case V_BUF: return "a buffer";
    case V_CHUNK: return "a chunk";
    case V_CHAN: return "a channel";
    case V_SEM: return "a semaphore";
    }
    return "a value";
}

const char *sema_word(const Expr *e) {
    return e && e->kind == EX_NAME ? e->name : NULL;
}

static const char *buf_name(Sema *s, int buf) {
    if (buf == 0) return "input";
    if (buf == 1) return "output";
    return s->scratch[buf - 2].name;
}

const char *sema_buf_desc(Sema *s, int rank, int buf) {
    if (buf < 2) return arena_printf(s->arena, "rank %d's %s", rank, buf_name(s, buf));
    return arena_printf(s->arena, "rank %d's scratch '%s'", rank, buf_name(s, buf));
}

static int64_t buf_chunks(Sema *s, int buf) {
    if (buf == 0) return s->in_chunks;
    if (buf == 1) return s->out_chunks;
    return s->scratch[buf - 2].chunks;
}

/* Makes the chunk [a:b) of buffer `buf` of `rank` after checking it, then maps it onto the plan's
 * buffers: scratch declarations are laid out one after another in "s"; in-place collectives
 * alias input and output the way the MSCCL++ DSL does (spec §8.2). */
static bool make_chunk(Sema *s, SrcLoc loc, int rank, int buf, int64_t a, int64_t b, Value *out) {
    int64_t n = buf_chunks(s, buf);
    const char *bn = buf_name(s, buf);
    if (a >= b) {
        sema_error(s, loc, "chunk %s[%" PRId64 ":%" PRId64 "] is empty (the end must be above the start)",
                   bn, a, b);
        return false;
    }
    if (a < 0 || b > n) {
        sema_error(s, loc, "chunk %s[%" PRId64 ":%" PRId64 "] is outside %s (%" PRId64 " chunk%s)", bn, a,
                   b, sema_buf_desc(s, rank, buf), n, n == 1 ? "" : "s");
        return false;
    }
    memset(out, 0, sizeof *out);
    out->kind = V_CHUNK;
    out->rank = rank;
    out->buf = buf;
    out->a = a;
    out->b = b;
    out->size = (uint32_t)(b - a);
    if (buf >= 2) {
        out->type = PLAN_BUF_SCRATCH;
        out->index = s->scratch[buf - 2].offset + (uint32_t)a;
        return true;
    }
    out->type = buf == 0 ? PLAN_BUF_INPUT : PLAN_BUF_OUTPUT;
    out->index = (uint32_t)a;
    if (!s->inplace) return true;
    int64_t cf = s->chunk_factor;
    switch (s->coll) {
    case PLAN_COLL_ALLGATHER:     /* the input is output block [r*cf, (r+1)*cf) */
        if (buf == 0) {
            out->type = PLAN_BUF_OUTPUT;
            out->index = (uint32_t)(rank * cf + a);
        }
        break;
    case PLAN_COLL_REDUCESCATTER: /* the output is input block [r*cf, (r+1)*cf) */
        if (buf == 1) {
            out->type = PLAN_BUF_INPUT;
            out->index = (uint32_t)(rank * cf + a);
        }
        break;
    case PLAN_COLL_CUSTOM:
        break;
    default:                      /* same-size collectives: the output is the input */
        out->type = PLAN_BUF_INPUT;
        break;
    }
    return true;
}

static bool check_rank(Sema *s, SrcLoc loc, int64_t r, const char *what) {
    if (r < 0 || r >= s->nranks) {
        sema_error(s, loc, "%s %" PRId64 " is outside 0..%d (the program has %d rank%s)", what, r,
                   s->nranks - 1, s->nranks, s->nranks == 1 ? "" : "s");
        return false;
    }
    return true;
}

/* ---- expressions ------------------------------------------------------------------------- */
static bool arith(Sema *s, const Expr *e, int64_t x, int64_t y, int64_t *out) {
    bool ovf = false;
    switch (e->op) {
    case '+': ovf = __builtin_add_overflow(x, y, out); break;
    case '-': ovf = __builtin_sub_overflow(x, y, out); break;
    case '*': ovf = __builtin_mul_overflow(x, y, out); break;
    case '/':
    case '%':
        if (y == 0) {
            sema_error(s, e->loc, "division by zero");
            return false;
        }
        if (x == INT64_MIN && y == -1) {
            ovf = true;
            break;
        }
        *out = e->op == '/' ? x / y : x % y;
        break;
    case '<': *out = x < y; break;
    case '>': *out = x > y; break;
    case TK_LE: *out = x <= y; break;
    case TK_GE: *out = x >= y; break;
    case TK_EQ: *out = x == y; break;
    case TK_NE: *out = x != y; break;
    default:
        sema_error(s, e->loc, "unknown operator");
        return false;
    }
    if (ovf) {
        sema_error(s, e->loc, "integer overflow (%" PRId64 " and %" PRId64 ")", x, y);
        return false;
    }
    return true;
}

bool sema_eval_int(Sema *s, const Expr *e, int64_t *out) {
    Value v;
    if (!sema_eval(s, e, &v)) return false;
    if (v.kind != V_INT) {
        sema_error(s, e->loc, "expected an integer, found %s", kind_name(v.kind));
        return false;
    }
    *out = v.i;
    return true;
}

static void list_push(Sema *s, Value *list, const Value *v, int *cap) {
    if (list->n == *cap) {
        int c = *cap ? *cap * 2 : 8;
        Value *items = arena_must(s->arena, (size_t)c * sizeof *items);
        if (list->n) memcpy(items, list->items, (size_t)list->n * sizeof *items);
        list->items = items;
        *cap = c;
    }
    list->items[list->n++] = *v;
}

static bool eval_range(Sema *s, const Expr *e, Value *out) {
    memset(out, 0, sizeof *out);
    out->kind = V_RANGE;
    out->step = 1;
    if (!e->a || !e->b) {
        sema_error(s, e->loc, "a range needs both ends here");
        return false;
    }
    if (!sema_eval_int(s, e->a, &out->lo) || !sema_eval_int(s, e->b, &out->hi)) return false;
    if (e->c) {
        if (!sema_eval_int(s, e->c, &out->step)) return false;
        if (out->step <= 0) {
            sema_error(s, e->c->loc, "range step must be positive, not %" PRId64, out->step);
            return false;
        }
    }
    return true;
}

int64_t sema_range_len(const Value *r) {
    if (r->hi <= r->lo) return 0;
    int64_t span;
    if (__builtin_sub_overflow(r->hi, r->lo, &span)) return INT64_MAX;
    return span / r->step + (span % r->step != 0);
}

static bool count_iterations(Sema *s, SrcLoc loc, int64_t n) {
    /* the caller's bound where it is lower (MscclcOptions.max_iterations: a fuzzer under
     * sanitizers, a service compiling programs it does not trust) */
    const int64_t cap = s->opt->max_iterations > 0 && s->opt->max_iterations < SEMA_MAX_ITERATIONS
                      ? s->opt->max_iterations : SEMA_MAX_ITERATIONS;
    if (n < 0) n = 0;
    if (n > cap - s->iterations) {
        sema_error(s, loc, "the program runs more than %" PRId64 " loop iterations", cap);
        s->iterations = cap;
        s->stopped = true;
        return false;
    }
    s->iterations += n;
    return true;
}

/* Expands list elements: ranges become their integers. */
static bool eval_list(Sema *s, const AstList *elems, Value *out) {
    memset(out, 0, sizeof *out);
    out->kind = V_LIST;
    int cap = 0;
    for (int i = 0; i < elems->n; i++) {
        const Expr *x = elems->v[i];
        if (x->kind == EX_RANGE) {
            Value r;
            if (!eval_range(s, x, &r)) return false;
            int64_t n = sema_range_len(&r);
            if (!count_iterations(s, x->loc, n)) return false;
            for (int64_t k = 0; k < n; k++) {
                Value v = {.kind = V_INT, .i = r.lo + k * r.step};
                list_push(s, out, &v, &cap);
            }
            continue;
        }
        Value v;
        if (!sema_eval(s, x, &v)) return false;
        list_push(s, out, &v, &cap);
    }
    return true;
}

/* Iterates the cartesian product of `iters` (binding each variable in a new scope), calling fn
 * for every combination whose `cond` holds. Returns false if anything failed to evaluate. */
typedef bool (*IterFn)(Sema *s, void *ctx);

static bool iterate(Sema *s, const AstList *iters, int k, const Expr *cond, IterFn fn, void *ctx) {
    if (k == iters->n) {
        if (cond) {
            int64_t c;
            if (!sema_eval_int(s, cond, &c)) return false;
            if (!c) return true;
        }
        return fn(s, ctx);
    }
    const Iter *it = iters->v[k];
    Value r;
    if (it->range->kind != EX_RANGE) {
        const Expr *x = it->range;
        const char *w = x->kind == EX_CALL ? sema_word(x->a) : NULL;
        if (w && strcmp(w, "range") == 0 && x->args.n >= 1 && x->args.n <= 3)
            sema_error(s, x->loc, "'range(...)' is Python; a .coll range is written %s",
                       x->args.n == 1 ? "'0 .. N' (0 up to N - 1)"
                       : x->args.n == 2 ? "'a .. b' (a up to b - 1)" : "'a .. b step c'");
        else
            sema_error(s, x->loc, "expected a range 'a .. b' after 'in'");
        return false;
    }
    if (!eval_range(s, it->range, &r)) return false;
    int64_t n = sema_range_len(&r);
    if (!count_iterations(s, it->loc, n)) return false;
    int mark = s->nscope;
    Symbol *sym = declare(s, SYM_VALUE, it->name, it->loc);
    if (!sym) return false;
    sym->loop_var = true;
    push_sym(s, &s->loops, &s->nloops, &s->caploops, sym);
    bool ok = true;
    for (int64_t j = 0; j < n && ok && !sema_halted(s); j++) {
        sym->v = (Value){.kind = V_INT, .i = r.lo + j * r.step};
        ok = iterate(s, iters, k + 1, cond, fn, ctx);
        pop_scope(s, mark + 1);  /* drop anything the body declared */
    }
    s->nloops--;
    pop_scope(s, mark);
    return ok;
}

typedef struct {
    const Expr *body;
    Value *out;
    int cap;
} CompCtx;

static bool comp_item(Sema *s, void *ctx) {
    CompCtx *c = ctx;
    Value v;
    if (!sema_eval(s, c->body, &v)) return false;
    list_push(s, c->out, &v, &c->cap);
    return true;
}

/* Resolves `name[i][j]...` of a channel/semaphore array, or returns 0 if the base is not an array
 * name (then the caller evaluates the expression normally). -1 on error. */
static int eval_element(Sema *s, const Expr *e, Value *out) {
    const Expr *idx[SEMA_MAX_DIMS + 1];
    int n = 0;
    const Expr *b = e;
    while (b->kind == EX_INDEX) {
        if (n == SEMA_MAX_DIMS) return 0;
        idx[n++] = b->b;
        b = b->a;
    }
    if (b->kind != EX_NAME) return 0;
    Symbol *sym = lookup(s, b->name);
    if (!sym || (sym->kind != SYM_CHANARR && sym->kind != SYM_SEMARR)) return 0;
    const char *what = sym->kind == SYM_CHANARR ? "channel" : "semaphore";
    if (n != sym->ndims) {
        sema_error(s, e->loc, "%s array '%s' takes %d subscript%s, not %d", what, sym->name, sym->ndims,
                   sym->ndims == 1 ? "" : "s", n);
        return -1;
    }
    int64_t iv[SEMA_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++)
        if (!sema_eval_int(s, idx[n - 1 - i], &iv[i])) return -1;
    Elem *el = elem_find(s, sym, iv, n, false);
    if (!el) {
        char buf[256];
        int len = snprintf(buf, sizeof buf, "%s", sym->name);
        for (int i = 0; i < n && len < (int)sizeof buf; i++)
            len += snprintf(buf + len, sizeof buf - (size_t)len, "[%" PRId64 "]", iv[i]);
        if (sema_error(s, e->loc, "%s '%s' is not declared", what, buf))
            sema_note(s, sym->loc, "the array is declared here");
        return -1;
    }
    memset(out, 0, sizeof *out);
    if (sym->kind == SYM_CHANARR) {
        out->kind = V_CHAN;
        out->chan = el->elem;
    } else {
        out->kind = V_SEM;
        out->sem = el->elem;
    }
    return 1;
}

static bool eval_call(Sema *s, const Expr *e, Value *out) {
    const char *fn = sema_word(e->a);
    if (!fn) {
        sema_error(s, e->loc, "an operation cannot be used as a value");
        return false;
    }
    for (int i = 0; i < e->args.n; i++) {
        const Expr *x = e->args.v[i];
        if (x->kind == EX_NAMED || x->kind == EX_RANGE || x->kind == EX_ARROW) {
            sema_error(s, x->loc, "'%s' takes plain values only", fn);
            return false;
        }
    }
    if (strcmp(fn, "rank") == 0) {
        if (e->args.n != 1) {
            sema_error(s, e->loc, "rank() takes 1 argument, not %d", e->args.n);
            return false;
        }
        int64_t r;
        if (!sema_eval_int(s, e->args.v[0], &r)) return false;
        if (!check_rank(s, ((Expr *)e->args.v[0])->loc, r, "rank")) return false;
        memset(out, 0, sizeof *out);
        out->kind = V_RANK;
        out->rank = (int)r;
        return true;
    }
    if (strcmp(fn, "min") == 0 || strcmp(fn, "max") == 0) {
        if (e->args.n < 1) {
            sema_error(s, e->loc, "%s() needs at least 1 argument", fn);
            return false;
        }
        int64_t best = 0;
        for (int i = 0; i < e->args.n; i++) {
            int64_t v;
            if (!sema_eval_int(s, e->args.v[i], &v)) return false;
            if (i == 0 || (fn[1] == 'i' ? v < best : v > best)) best = v;
        }
        *out = (Value){.kind = V_INT, .i = best};
        return true;
    }
    Symbol *sym = lookup(s, fn);
    if (sym && sym->kind == SYM_FUNC) {
        sema_error(s, e->a->loc, "'%s' is defined with 'def' and gives no value: call it as a "
                   "statement, '%s(...)'", fn, fn);
        return false;
    }
    if (sym) {
        sema_error(s, e->a->loc, "'%s' is not a function", fn);
        return false;
    }
    sema_error(s, e->a->loc, "unknown function '%s' (functions: rank, min, max, and those "
               "defined with 'def', called as statements)", fn);
    return false;
}

static bool eval_node(Sema *s, const Expr *e, Value *out);

#define SEMA_MAX_DEPTH 2000   /* nesting of expressions and blocks; keeps the C stack bounded */

bool sema_eval(Sema *s, const Expr *e, Value *out) {
    if (s->depth >= SEMA_MAX_DEPTH) {
        memset(out, 0, sizeof *out);
        sema_error(s, e->loc, "expression nested more than %d deep", SEMA_MAX_DEPTH);
        return false;
    }
    s->depth++;
    bool ok = eval_node(s, e, out);
    s->depth--;
    return ok;
}

static bool eval_node(Sema *s, const Expr *e, Value *out) {
    memset(out, 0, sizeof *out);
    switch (e->kind) {
    case EX_INT:
        out->kind = V_INT;
        out->i = e->ival;
        return true;
    case EX_STR:
        out->kind = V_STR;
        out->s = e->str;
        return true;
    case EX_NAME: {
        Symbol *sym = lookup(s, e->name);
        if (!sym) {
            sema_error(s, e->loc, "use of undeclared name '%s'", e->name);
            return false;
        }
        switch (sym->kind) {
        case SYM_VALUE:
        case SYM_PARAM:
            *out = sym->v;
            return true;
        case SYM_SCRATCH:
            sema_error(s, e->loc, "scratch '%s' belongs to a rank: write rank(r).%s", e->name, e->name);
            return false;
        case SYM_CHANARR:
        case SYM_SEMARR:
            if (sym->ndims == 0) {
                int r = eval_element(s, e, out);
                if (r != 0) return r > 0;
            }
            sema_error(s, e->loc, "'%s' is an array: it needs %d subscript%s", e->name, sym->ndims,
                       sym->ndims == 1 ? "" : "s");
            return false;
        case SYM_FUNC:
            sema_error(s, e->loc, "'%s' is a function: call it as a statement, '%s(...)'", e->name,
                       e->name);
            return false;
        }
        return false;
    }
    case EX_UNARY: {
        int64_t x;
        if (!sema_eval_int(s, e->a, &x)) return false;
        out->kind = V_INT;
        if (e->op == '!') {
            out->i = !x;
        } else if (x == INT64_MIN) {
            sema_error(s, e->loc, "integer overflow");
            return false;
        } else {
            out->i = -x;
        }
        return true;
    }
    case EX_BINARY: {
        int64_t x, y;
        if (!sema_eval_int(s, e->a, &x)) return false;
        out->kind = V_INT;
        if (e->op == TK_AND || e->op == TK_OR) {
            if (e->op == TK_AND ? !x : x) {
                out->i = e->op == TK_OR;
                return true;
            }
            if (!sema_eval_int(s, e->b, &y)) return false;
            out->i = y != 0;
            return true;
        }
        if (!sema_eval_int(s, e->b, &y)) return false;
        return arith(s, e, x, y, &out->i);
    }
    case EX_CALL:
        return eval_call(s, e, out);
    case EX_INDEX:
    case EX_SLICE: {
        if (e->kind == EX_INDEX) {
            int r = eval_element(s, e, out);
            if (r != 0) return r > 0;
        }
        Value base;
        if (!sema_eval(s, e->a, &base)) return false;
        int64_t a, b;
        if (!sema_eval_int(s, e->b, &a)) return false;
        if (e->kind == EX_SLICE) {
            if (!sema_eval_int(s, e->c, &b)) return false;
        } else {
            b = a + (a < INT64_MAX);
        }
        if (base.kind == V_BUF) return make_chunk(s, e->loc, base.rank, base.buf, a, b, out);
        if (base.kind == V_LIST && e->kind == EX_INDEX) {
            if (a < 0 || a >= base.n) {
                sema_error(s, e->loc, "list index %" PRId64 " is outside 0..%d", a, base.n - 1);
                return false;
            }
            *out = base.items[a];
            return true;
        }
        sema_error(s, e->loc, "%s cannot be indexed", kind_name(base.kind));
        return false;
    }
    case EX_MEMBER: {
        Value base;
        if (!sema_eval(s, e->a, &base)) return false;
        if (base.kind != V_RANK) {
            sema_error(s, e->loc, "%s has no member '%s'", kind_name(base.kind), e->name);
            return false;
        }
        int buf = -1;
        if (strcmp(e->name, "input") == 0) buf = 0;
        else if (strcmp(e->name, "output") == 0) buf = 1;
        else {
            Symbol *sym = lookup(s, e->name);
            if (sym && sym->kind == SYM_SCRATCH) buf = 2 + sym->scratch;
        }
        if (buf < 0) {
            sema_error(s, e->loc, "rank %d has no buffer '%s' (input, output or a scratch name)", base.rank,
                       e->name);
            return false;
        }
        memset(out, 0, sizeof *out);
        out->kind = V_BUF;
        out->rank = base.rank;
        out->buf = buf;
        return true;
    }
    case EX_LIST:
        return eval_list(s, &e->args, out);
    case EX_COMP: {
        out->kind = V_LIST;
        CompCtx c = {e->a, out, 0};
        return iterate(s, &e->iters, 0, e->cond, comp_item, &c);
    }
    case EX_RANGE:
        return eval_range(s, e, out);
    case EX_ARROW:
        sema_error(s, e->loc, "'->' only names the two ends of a channel");
        return false;
    case EX_NAMED:
        sema_error(s, e->loc, "named argument '%s' is not allowed here", e->name);
        return false;
    }
    return false;
}

bool sema_eval_chunk(Sema *s, const Expr *e, Value *out) {
    if (!sema_eval(s, e, out)) return false;
    if (out->kind == V_BUF) {
        int64_t n = buf_chunks(s, out->buf);
        return make_chunk(s, e->loc, out->rank, out->buf, 0, n, out);
    }
    if (out->kind != V_CHUNK) {
        sema_error(s, e->loc, "expected a chunk such as rank(r).input[a:b], found %s", kind_name(out->kind));
        return false;
    }
    return true;
}

bool sema_eval_chunk_list(Sema *s, const Expr *e, Value **items, int *n) {
    Value v;
    if (!sema_eval(s, e, &v)) return false;
    if (v.kind != V_LIST) {
        sema_error(s, e->loc, "expected a list of chunks [...], found %s", kind_name(v.kind));
        return false;
    }
    for (int i = 0; i < v.n; i++) {
        if (v.items[i].kind == V_BUF) {
            Value c;
            if (!make_chunk(s, e->loc, v.items[i].rank, v.items[i].buf, 0, buf_chunks(s, v.items[i].buf), &c))
                return false;
            v.items[i] = c;
        } else if (v.items[i].kind != V_CHUNK) {
            sema_error(s, e->loc, "element %d of the list is %s, not a chunk", i, kind_name(v.items[i].kind));
            return false;
        }
    }
    *items = v.items;
    *n = v.n;
    return true;
}

/* ---- header ---------------------------------------------------------------------------------- */
static bool header_int(Sema *s, const HeaderItem *h, int64_t lo, int64_t hi, int64_t *out) {
    if (h->args.n != 1) {
        sema_error(s, h->loc, "'%s' takes one value", h->key);
        return false;
    }
    const Expr *x = h->args.v[0];
    if (!sema_eval_int(s, x, out)) return false;
    if (*out < lo || *out > hi) {
        sema_error(s, x->loc, "'%s %" PRId64 "' is outside %" PRId64 "..%" PRId64, h->key, *out, lo, hi);
        return false;
    }
    return true;
}

static bool header_word(Sema *s, const HeaderItem *h, const char **out) {
    if (h->args.n != 1 || !sema_word(h->args.v[0])) {
        sema_error(s, h->loc, "'%s' takes one word", h->key);
        return false;
    }
    *out = sema_word(h->args.v[0]);
    return true;
}

static bool header_flag(Sema *s, const HeaderItem *h, bool *out) {
    if (h->args.n == 0) {
        *out = true;
        return true;
    }
    const char *w;
    if (!header_word(s, h, &w)) return false;
    if (strcmp(w, "on") == 0 || strcmp(w, "true") == 0) *out = true;
    else if (strcmp(w, "off") == 0 || strcmp(w, "false") == 0) *out = false;
    else {
        sema_error(s, ((Expr *)h->args.v[0])->loc, "'%s' takes on or off, not '%s'", h->key, w);
        return false;
    }
    return true;
}

static void add_tag(Sema *s, const char *t) {
    Plan *p = s->plan;
    char **tags = realloc(p->tags, (size_t)(p->ntags + 1) * sizeof *tags);
    if (!tags) return;
    p->tags = tags;
    size_t n = strlen(t) + 1;
    char *d = malloc(n);
    if (!d) return;
    memcpy(d, t, n);
    p->tags[p->ntags++] = d;
}

/* Header values wait here until the plan exists (it needs the rank count). */
typedef struct {
    bool have_coll, have_ranks, have_chunks;
    bool ll, reuse, dbl, have_threads, have_align, have_sizes;
    int64_t threads, align, min_size, max_size;
    const HeaderItem *tags;
} Header;

static bool header_item(Sema *s, const HeaderItem *h, Header *hd);

/* `collective allreduce(ranks = N, chunk_factor = 1, inplace)` (the call form) */
static bool header_call(Sema *s, const Expr *call, Header *hd) {
    for (int i = 0; i < call->args.n; i++) {
        const Expr *x = call->args.v[i];
        HeaderItem sub = {.loc = x->loc};
        if (x->kind == EX_NAMED) {
            sub.key = x->name;
            ast_list_push(s->arena, &sub.args, x->a);
        } else if (sema_word(x)) {
            sub.key = sema_word(x);
        } else {
            sema_error(s, x->loc, "expected 'key = value' or a word");
            return false;
        }
        if (strcmp(sub.key, "collective") == 0 || !header_item(s, &sub, hd)) {
            if (strcmp(sub.key, "collective") == 0) sema_error(s, x->loc, "nested 'collective'");
            return false;
        }
    }
    return true;
}

/* header_line = key args   (see coll(5) for the keys) */
static bool header_item(Sema *s, const HeaderItem *h, Header *hd) {
    const char *k = h->key;
    int64_t v;
    const char *w;
    if (strcmp(k, "collective") == 0) {
        const Expr *x = h->args.n == 1 ? h->args.v[0] : NULL;
        const Expr *call = NULL;
        if (x && x->kind == EX_CALL && sema_word(x->a)) {
            call = x;
            x = x->a;
        }
        if (!x || !sema_word(x)) {
            sema_error(s, h->loc, "'collective' takes one of allreduce, allgather, reducescatter, alltoall, "
                                  "broadcast, reduce, gather, scatter, sendrecv, custom");
            return false;
        }
        w = sema_word(x);
        PlanCollective c;
        if (!plan_coll_from_name(w, &c) || c == PLAN_COLL_TEST) {
            sema_error(s, x->loc, "unknown collective '%s' (allreduce, allgather, reducescatter, alltoall, "
                                  "broadcast, reduce, gather, scatter, sendrecv or custom)", w);
            return false;
        }
        s->coll = c;
        hd->have_coll = true;
        return call ? header_call(s, call, hd) : true;
    }
    if (strcmp(k, "ranks") == 0) {
        if (!header_int(s, h, 1, SEMA_MAX_RANKS, &v)) return false;
        s->nranks = (int)v;
        hd->have_ranks = true;
        return true;
    }
    if (strcmp(k, "chunk_factor") == 0) return header_int(s, h, 1, 1 << 20, &s->chunk_factor);
    if (strcmp(k, "chunks") == 0) {
        bool in = false, out = false;
        for (int i = 0; i < h->args.n; i++) {
            const Expr *x = h->args.v[i];
            if (x->kind != EX_NAMED || (strcmp(x->name, "in") != 0 && strcmp(x->name, "out") != 0)) {
                sema_error(s, x->loc, "'chunks' takes 'in = A, out = B'");
                return false;
            }
            if (!sema_eval_int(s, x->a, &v)) return false;
            if (v < 1 || v > (1 << 24)) {
                sema_error(s, x->loc, "'chunks %s = %" PRId64 "' is outside 1..%d", x->name, v, 1 << 24);
                return false;
            }
            if (x->name[0] == 'i') s->custom_in = v, in = true;
            else s->custom_out = v, out = true;
        }
        if (!in || !out) {
            sema_error(s, h->loc, "'chunks' takes both 'in = A' and 'out = B'");
            return false;
        }
        hd->have_chunks = true;
        return true;
    }
    if (strcmp(k, "inplace") == 0 || strcmp(k, "outofplace") == 0) {
        if (h->args.n) {
            sema_error(s, h->loc, "'%s' takes no value", k);
            return false;
        }
        s->inplace = k[0] == 'i';
        return true;
    }
    if (strcmp(k, "protocol") == 0) {
        if (!header_word(s, h, &w)) return false;
        if (strcmp(w, "LL") != 0 && strcmp(w, "Simple") != 0) {
            sema_error(s, ((Expr *)h->args.v[0])->loc, "unknown protocol '%s' (LL or Simple)", w);
            return false;
        }
        hd->ll = w[0] == 'L';
        return true;
    }
    if (strcmp(k, "threads") == 0) {
        if (!header_int(s, h, 32, PLAN_MAX_THREADS, &hd->threads)) return false;
        if (hd->threads % 32) {
            sema_error(s, ((Expr *)h->args.v[0])->loc, "'threads %" PRId64 "' is not a multiple of 32",
                       hd->threads);
            return false;
        }
        hd->have_threads = true;
        return true;
    }
    if (strcmp(k, "instances") == 0) {
        if (!header_int(s, h, 1, 64, &v)) return false;
        s->instances = (int)v;
        return true;
    }
    if (strcmp(k, "alignment") == 0) {
        /* one rule, coll(5)'s: the plan loader needs a power of two of at least 4 bytes */
        if (!header_int(s, h, INT64_MIN, INT64_MAX, &hd->align)) return false;
        if (hd->align < SEMA_MIN_ALIGN || hd->align > SEMA_MAX_ALIGN || (hd->align & (hd->align - 1))) {
            sema_error(s, ((Expr *)h->args.v[0])->loc,
                       "'alignment %" PRId64 "' is not a power of two from %d to %d bytes", hd->align,
                       SEMA_MIN_ALIGN, SEMA_MAX_ALIGN);
            return false;
        }
        hd->have_align = true;
        return true;
    }
    if (strcmp(k, "sizes") == 0) {
        const Expr *x = h->args.n == 1 ? h->args.v[0] : NULL;
        if (!x || x->kind != EX_RANGE || x->c) {
            sema_error(s, h->loc, "'sizes' takes 'MIN .. MAX' (either side may be left out)");
            return false;
        }
        hd->min_size = 0;
        hd->max_size = -1;
        if (x->a && !sema_eval_int(s, x->a, &hd->min_size)) return false;
        if (x->b && !sema_eval_int(s, x->b, &hd->max_size)) return false;
        if (hd->min_size < 0 || (x->b && hd->max_size < hd->min_size)) {
            sema_error(s, x->loc, "'sizes %" PRId64 " .. %" PRId64 "' is not a valid size range", hd->min_size,
                       hd->max_size);
            return false;
        }
        hd->have_sizes = true;
        return true;
    }
    if (strcmp(k, "tags") == 0) {
        for (int i = 0; i < h->args.n; i++)
            if (!sema_word(h->args.v[i]) && ((Expr *)h->args.v[i])->kind != EX_STR) {
                sema_error(s, ((Expr *)h->args.v[i])->loc, "a tag is a word or a string");
                return false;
            }
        hd->tags = h;
        return true;
    }
    if (strcmp(k, "double_scratch") == 0) return header_flag(s, h, &hd->dbl);
    if (strcmp(k, "reuse_resources") == 0) return header_flag(s, h, &hd->reuse);
    if (strcmp(k, "fusion") == 0) return header_flag(s, h, &s->fusion);
    if (strcmp(k, "auto_sync") == 0) return header_flag(s, h, &s->auto_sync);
    sema_error(s, h->loc, "unknown header key '%s'", k);
    return false;
}

/* program = "program" NAME "{" header_line* "}" */
static void exec_program(Sema *s, const Stmt *st) {
    if (s->plan) {
        sema_error(s, st->loc, "second 'program' header (one program per file)");
        return;
    }
    Header hd = {0};
    s->name = st->name;
    s->program_loc = st->loc;
    s->chunk_factor = 1;
    s->instances = 1;
    s->fusion = true;
    s->auto_sync = true;
    bool ok = true;
    for (int i = 0; i < st->header.n; i++) ok &= header_item(s, st->header.v[i], &hd);
    if (ok && !hd.have_coll) {
        sema_error(s, st->loc, "program '%s' has no 'collective' line", st->name);
        ok = false;
    }
    if (ok && !hd.have_ranks) {
        sema_error(s, st->loc, "program '%s' has no 'ranks' line", st->name);
        ok = false;
    }
    if (ok && s->coll == PLAN_COLL_CUSTOM && !hd.have_chunks) {
        sema_error(s, st->loc, "a custom collective needs 'chunks in = A, out = B'");
        ok = false;
    }
    if (ok && s->coll != PLAN_COLL_CUSTOM && hd.have_chunks) {
        sema_error(s, st->loc, "'chunks' is only for custom collectives (the others follow chunk_factor)");
        ok = false;
    }
    /* in place, allgather and reducescatter put one buffer inside the other at a rank-dependent
     * offset (spec §3.7); a rooted gather or scatter has no such layout on every rank */
    if (ok && s->inplace && (s->coll == PLAN_COLL_GATHER || s->coll == PLAN_COLL_SCATTER)) {
        sema_error(s, st->loc, "an in-place %s has no chunk layout in the language: write it "
                               "'outofplace' (such a plan also runs in place)", plan_coll_name(s->coll));
        ok = false;
    }
    if (!ok || !lower_begin(s, st->loc)) {
        s->stopped = true;   /* without a plan every later statement would only fail too */
        return;
    }
    Plan *p = s->plan;
    p->protocol_ll = hd.ll;
    p->inplace = s->inplace;
    p->reuse_resources = hd.reuse;
    p->double_scratch = hd.dbl;
    if (hd.have_threads) p->threads = (int)hd.threads;
    if (hd.have_align) p->alignment = (uint32_t)hd.align;
    if (hd.have_sizes) {
        p->min_size = (uint64_t)hd.min_size;
        p->max_size = hd.max_size < 0 ? UINT64_MAX : (uint64_t)hd.max_size;
    }
    if (hd.tags)
        for (int i = 0; i < hd.tags->args.n; i++) {
            const Expr *x = hd.tags->args.v[i];
            add_tag(s, x->kind == EX_STR ? x->str : x->name);
        }
}

/* ---- declarations ------------------------------------------------------------------------------ */
/* param = "param" NAME "=" expr    (a -D NAME=V override replaces the default) */
static void exec_param(Sema *s, const Stmt *st, int depth) {
    if (depth > 0) {
        sema_error(s, st->loc, "'param %s' must be at the top level", st->name);
        return;
    }
    int64_t v;
    if (!sema_eval_int(s, st->e, &v)) return;
    for (int i = 0; i < s->opt->ndefines; i++)
        if (strcmp(s->opt->defines[i].name, st->name) == 0) {
            v = s->opt->defines[i].value;
            s->define_used[i] = true;
        }
    Symbol *sym = declare_global(s, SYM_PARAM, st->name, st->loc);
    if (sym) sym->v = (Value){.kind = V_INT, .i = v};
}

/* scratch = "scratch" NAME "[" expr "]" */
static void exec_scratch(Sema *s, const Stmt *st, int depth) {
    if (depth > 0) {
        sema_error(s, st->loc, "'scratch %s' must be at the top level", st->name);
        return;
    }
    int64_t n;
    if (!sema_eval_int(s, st->e, &n)) return;
    if (n < 1 || n > (int64_t)1 << 24 || s->scratch_total + (uint64_t)n > ((uint64_t)1 << 24)) {
        sema_error(s, st->e->loc, "scratch '%s' of %" PRId64 " chunks: sizes must be 1..%d chunks in all",
                   st->name, n, 1 << 24);
        return;
    }
    Symbol *sym = declare_global(s, SYM_SCRATCH, st->name, st->loc);
    if (!sym) return;
    if (s->nscratch == s->capscratch) {
        int cap = s->capscratch ? s->capscratch * 2 : 4;
        ScratchDecl *v = arena_must(s->arena, (size_t)cap * sizeof *v);
        if (s->nscratch) memcpy(v, s->scratch, (size_t)s->nscratch * sizeof *v);
        s->scratch = v;
        s->capscratch = cap;
    }
    sym->scratch = s->nscratch;
    s->scratch[s->nscratch++] = (ScratchDecl){st->name, n, s->scratch_total, st->loc};
    s->scratch_total += (uint32_t)n;
}

static bool named_int(Sema *s, const Expr *call, const char *name, int64_t *out, bool required) {
    for (int i = 0; i < call->args.n; i++) {
        const Expr *x = call->args.v[i];
        if (x->kind == EX_NAMED && strcmp(x->name, name) == 0) return sema_eval_int(s, x->a, out);
    }
    if (required) sema_error(s, call->loc, "missing argument '%s = ...'", name);
    return !required;
}

/* Resolves the declaration target `name[i]...` into (array symbol, subscripts). */
static Elem *declare_element(Sema *s, const Stmt *st, SymKind kind) {
    const Expr *idx[SEMA_MAX_DIMS];
    int n = 0;
    const Expr *b = st->target;
    while (b->kind == EX_INDEX) {
        if (n == SEMA_MAX_DIMS) {
            sema_error(s, st->target->loc, "more than %d subscripts", SEMA_MAX_DIMS);
            return NULL;
        }
        idx[n++] = b->b;
        b = b->a;
    }
    int64_t iv[SEMA_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++)
        if (!sema_eval_int(s, idx[n - 1 - i], &iv[i])) return NULL;
    Symbol *sym = lookup(s, b->name);
    if (sym && sym->kind != kind) {
        if (sema_error(s, b->loc, "redefinition of '%s'", b->name))
            sema_note(s, sym->loc, "previous declaration is here");
        return NULL;
    }
    if (!sym) {
        sym = declare_global(s, kind, b->name, b->loc);
        if (!sym) return NULL;
        sym->ndims = n;
    }
    if (sym->ndims != n) {
        if (sema_error(s, st->target->loc, "'%s' was declared with %d subscript%s, not %d", b->name, sym->ndims,
                       sym->ndims == 1 ? "" : "s", n))
            sema_note(s, sym->loc, "first declared here");
        return NULL;
    }
    Elem *el = elem_find(s, sym, iv, n, true);
    if (el->elem) {
        if (sema_error(s, st->target->loc, "'%s' is declared twice with the same subscripts", b->name))
            sema_note(s, el->loc, "previous declaration is here");
        return NULL;
    }
    el->loc = st->target->loc;
    return el;
}

static const char *elem_name(Sema *s, const Elem *el) {
    char buf[256];
    int len = snprintf(buf, sizeof buf, "%s", el->sym->name);
    for (int i = 0; i < el->sym->ndims && len < (int)sizeof buf; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "[%" PRId64 "]", el->idx[i]);
    return arena_strndup(s->arena, buf, strlen(buf));
}

const char *sema_chan_name(Sema *s, Channel *c) {
    if (!c->name) c->name = elem_name(s, c->decl);
    return c->name;
}

/* channel = "channel" target "=" (memory|port)(a -> b) | switch(ranks = [...], buffer = B) */
static void exec_channel(Sema *s, const Stmt *st) {
    if (!s->plan) {
        sema_error(s, st->loc, "channel declared before the 'program' header");
        return;
    }
    const Expr *e = st->e;
    const char *kind = e->kind == EX_CALL ? sema_word(e->a) : NULL;
    PlanChanType t;
    if (kind && strcmp(kind, "memory") == 0) t = PLAN_CHAN_MEMORY;
    else if (kind && strcmp(kind, "port") == 0) t = PLAN_CHAN_PORT;
    else if (kind && strcmp(kind, "switch") == 0) t = PLAN_CHAN_SWITCH;
    else {
        sema_error(s, e->loc, "a channel is memory(a -> b), port(a -> b) or switch(ranks = [...], buffer = B)");
        return;
    }
    Channel *c = arena_must(s->arena, sizeof *c);
    c->type = t;
    if (t != PLAN_CHAN_SWITCH) {
        const Expr *x = e->args.n == 1 ? e->args.v[0] : NULL;
        if (!x || x->kind != EX_ARROW) {
            sema_error(s, e->loc, "%s channel needs 'from -> to'", kind);
            return;
        }
        int64_t a, b;
        if (!sema_eval_int(s, x->a, &a) || !sema_eval_int(s, x->b, &b)) return;
        if (!check_rank(s, x->a->loc, a, "rank") || !check_rank(s, x->b->loc, b, "rank")) return;
        if (a == b) {
            sema_error(s, x->loc, "%s channel from rank %" PRId64 " to itself", kind, a);
            return;
        }
        if (!sema_charge(s, st->loc, &s->nchannels, 1, SEMA_MAX_CHANNELS, "channels", SEMA_OWN_LIMIT)) return;
        Elem *el = declare_element(s, st, SYM_CHANARR);
        if (!el) return;
        c->src = (int)a;
        c->dst = (int)b;
        c->decl = el;
        c->gpu_index = plan_gpu_add_peer(&s->plan->gpus[a], t, (int)b);
        if (c->gpu_index < 0) {
            sema_error(s, st->loc, "out of memory");
            return;
        }
        el->elem = c;
        if (s->nchans == s->capchans) {
            int cap = s->capchans ? s->capchans * 2 : 64;
            Channel **v = arena_must(s->arena, (size_t)cap * sizeof *v);
            if (s->nchans) memcpy(v, s->chans, (size_t)s->nchans * sizeof *v);
            s->chans = v;
            s->capchans = cap;
        }
        s->chans[s->nchans++] = c;
        return;
    }
    Value ranks = {0};
    const char *bufw = NULL;
    const Expr *bufx = NULL;
    bool have_ranks = false;
    for (int i = 0; i < e->args.n; i++) {
        const Expr *x = e->args.v[i];
        if (x->kind == EX_NAMED && strcmp(x->name, "ranks") == 0) {
            if (!sema_eval(s, x->a, &ranks)) return;
            if (ranks.kind != V_LIST) {
                sema_error(s, x->a->loc, "'ranks' takes a list such as [0..N]");
                return;
            }
            have_ranks = true;
        } else if (x->kind == EX_NAMED && strcmp(x->name, "buffer") == 0 && sema_word(x->a)) {
            bufw = sema_word(x->a);
            bufx = x->a;
        } else {
            sema_error(s, x->loc, "switch() takes 'ranks = [...]' and 'buffer = input|output|scratch'");
            return;
        }
    }
    if (!have_ranks || !bufw) {
        sema_error(s, e->loc, "switch() needs 'ranks = [...]' and 'buffer = input|output|scratch'");
        return;
    }
    if (strcmp(bufw, "input") == 0) c->buf = PLAN_BUF_INPUT;
    else if (strcmp(bufw, "output") == 0) c->buf = PLAN_BUF_OUTPUT;
    else if (strcmp(bufw, "scratch") == 0) c->buf = PLAN_BUF_SCRATCH;
    else {
        Symbol *sym = lookup(s, bufw);
        if (!sym || sym->kind != SYM_SCRATCH) {
            sema_error(s, bufx->loc, "unknown buffer '%s' (input, output or scratch)", bufw);
            return;
        }
        c->buf = PLAN_BUF_SCRATCH;
    }
    /* the same aliasing as chunks: a switch over the in-place output binds the input */
    if (s->inplace && c->buf != PLAN_BUF_SCRATCH) {
        if (s->coll == PLAN_COLL_ALLGATHER) c->buf = PLAN_BUF_OUTPUT;
        else if (s->coll != PLAN_COLL_CUSTOM) c->buf = PLAN_BUF_INPUT;
    }
    if (ranks.n < 2) {
        sema_error(s, e->loc, "a switch channel needs at least 2 ranks");
        return;
    }
    /* every member's plan lists all members: at least 2 bytes (a number and a comma) each */
    int64_t list_bytes = 2 * (int64_t)ranks.n * ranks.n;
    if (!sema_charge(s, st->loc, &s->nswitches, 1, SEMA_MAX_SWITCHES, "switch channels",
                     "the compiler's limit (no rank can name more: 1024 thread blocks x 16)") ||
        !sema_charge(s, st->loc, &s->nchannels, ranks.n, SEMA_MAX_CHANNELS,
                     "channels (a switch channel counts once per member)", SEMA_OWN_LIMIT) ||
        !sema_charge(s, st->loc, &s->nbytes, list_bytes, (int64_t)SEMA_MAX_BYTES, SEMA_BYTES_WHAT,
                     SEMA_LOADER_LIMIT))
        return;
    c->nranks = ranks.n;
    c->ranks = arena_must(s->arena, (size_t)ranks.n * sizeof *c->ranks);
    c->index_of = arena_must(s->arena, (size_t)s->nranks * sizeof *c->index_of);
    for (int r = 0; r < s->nranks; r++) c->index_of[r] = -1;
    for (int i = 0; i < ranks.n; i++) {
        if (ranks.items[i].kind != V_INT) {
            sema_error(s, e->loc, "'ranks' must list integers");
            return;
        }
        if (!check_rank(s, e->loc, ranks.items[i].i, "switch member rank")) return;
        int r = (int)ranks.items[i].i;
        if (c->index_of[r] != -1) {
            sema_error(s, e->loc, "rank %d is listed twice in the switch channel", r);
            return;
        }
        c->ranks[i] = r;
        c->index_of[r] = 0;
    }
    Elem *el = declare_element(s, st, SYM_CHANARR);
    if (!el) return;
    c->decl = el;
    for (int i = 0; i < ranks.n; i++) {
        int r = c->ranks[i];
        c->index_of[r] = plan_gpu_add_switch(&s->plan->gpus[r], c->buf, c->ranks, c->nranks);
        if (c->index_of[r] < 0) {
            sema_error(s, st->loc, "out of memory");
            return;
        }
    }
    el->elem = c;
}

/* semaphore = "semaphore" target "=" semaphore(rank = r, init = v) */
static void exec_semaphore(Sema *s, const Stmt *st) {
    if (!s->plan) {
        sema_error(s, st->loc, "semaphore declared before the 'program' header");
        return;
    }
    const Expr *e = st->e;
    if (e->kind != EX_CALL || !sema_word(e->a) || strcmp(sema_word(e->a), "semaphore") != 0) {
        sema_error(s, e->loc, "a semaphore is declared as semaphore(rank = r, init = v)");
        return;
    }
    int64_t r, init = 0;
    for (int i = 0; i < e->args.n; i++) {
        const Expr *x = e->args.v[i];
        if (x->kind != EX_NAMED || (strcmp(x->name, "rank") != 0 && strcmp(x->name, "init") != 0)) {
            sema_error(s, x->loc, "semaphore() takes 'rank = r' and 'init = v'");
            return;
        }
    }
    if (!named_int(s, e, "rank", &r, true) || !named_int(s, e, "init", &init, false)) return;
    if (!check_rank(s, e->loc, r, "semaphore rank")) return;
    if (init < 0 || init > INT32_MAX) {
        sema_error(s, e->loc, "semaphore initial value %" PRId64 " is outside 0..%d", init, INT32_MAX);
        return;
    }
    if (!sema_charge(s, st->loc, &s->nsems, 1, SEMA_MAX_SEMAPHORES, "semaphores", SEMA_OWN_LIMIT)) return;
    Elem *el = declare_element(s, st, SYM_SEMARR);
    if (!el) return;
    Semaphore *sem = arena_must(s->arena, sizeof *sem);
    sem->name = elem_name(s, el);
    sem->rank = (int)r;
    sem->id = plan_gpu_add_semaphore(&s->plan->gpus[r], (int)init);
    el->elem = sem;
}

/* ---- statements -------------------------------------------------------------------------------- */
static void exec_list(Sema *s, const AstList *body, int depth);

typedef struct {
    const AstList *body;
    int depth;
} ForCtx;

static bool for_body(Sema *s, void *ctx) {
    ForCtx *f = ctx;
    exec_list(s, f->body, f->depth);
    return true;
}

/* A note naming where function `fn` is defined. */
static void def_note(Sema *s, const Stmt *fn) {
    diag_note(s->diag, fn->loc.at, "'%s' is defined here", fn->name);
}

/* stmt = "def" identifier "(" params ")" block
 * Binds the function's name for the statements after it; its body runs only when called. */
static void exec_def(Sema *s, const Stmt *st, int depth) {
    if (depth > 0) {
        sema_error(s, st->loc, "a function must be defined at the top level, not inside a block");
        return;
    }
    static const char *const ops[] = {"barrier", "broadcast", "broadcast_packets", "copy",
                                      "copy_packets", "pipeline", "reduce", "reduce_packets",
                                      "unpack_packets", "rank", "tb", "tbg"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(st->name, ops[i]) == 0) {
            sema_error(s, st->loc, "'%s' is a built-in name and cannot name a function", st->name);
            return;
        }
    for (int i = 0; i < st->params.n; i++)
        for (int j = 0; j < i; j++) {
            const Expr *a = st->params.v[i], *b = st->params.v[j];
            if (strcmp(a->name, b->name) == 0) {
                if (sema_error(s, a->loc, "parameter '%s' appears twice", a->name))
                    sema_note(s, b->loc, "first listed here");
                return;
            }
        }
    Symbol *sym = declare_global(s, SYM_FUNC, st->name, st->loc);
    if (sym) sym->fn = st;
}

/* stmt = identifier "(" args ")"   -- a call of a function defined with `def`
 * Expands the body with each parameter bound to its argument's value, like a loop variable.
 * The body sees globals, top-level lets and its parameters, never the caller's loop variables
 * or lets (they are hidden for the call). Recursion is refused: expansion would not end. */
static void exec_call(Sema *s, const Stmt *st, Symbol *fsym, int depth) {
    const Stmt *fn = fsym->fn;
    const Expr *call = st->e;
    if (st->place) {
        sema_error(s, st->place->loc, "a call of '%s' takes no '@' placement; place the operations "
                   "inside the function (a parameter may carry the thread block)", fn->name);
        return;
    }
    for (int i = 0; i < s->ncalls; i++)
        if (s->calls[i].fn == fn) {
            if (sema_error(s, call->loc, "recursive call of '%s': functions are expanded at compile "
                           "time and may not call themselves", fn->name))
                def_note(s, fn);
            s->stopped = true;
            return;
        }
    if (call->args.n != fn->params.n) {
        if (sema_error(s, call->loc, "'%s' takes %d argument%s but the call gives %d", fn->name,
                       fn->params.n, fn->params.n == 1 ? "" : "s", call->args.n))
            def_note(s, fn);
        return;
    }
    if (s->ncalls >= SEMA_MAX_DEPTH / 4) {
        sema_error(s, call->loc, "function calls nested more than %d deep", SEMA_MAX_DEPTH / 4);
        return;
    }
    Value *vals = arena_must(s->arena, (size_t)(fn->params.n + 1) * sizeof *vals);
    for (int i = 0; i < fn->params.n; i++) {
        const Expr *a = call->args.v[i];
        if (a->kind == EX_NAMED || a->kind == EX_ARROW) {
            sema_error(s, a->loc, "a function's arguments are values, in the order of its parameters");
            return;
        }
        if (!sema_eval(s, a, &vals[i])) return;
    }
    if (s->ncalls == s->capcalls) {
        int c = s->capcalls ? s->capcalls * 2 : 8;
        struct CallFrame *nv = arena_must(s->arena, (size_t)c * sizeof *nv);
        if (s->ncalls) memcpy(nv, s->calls, (size_t)s->ncalls * sizeof *nv);
        s->calls = nv;
        s->capcalls = c;
    }
    s->calls[s->ncalls++] = (struct CallFrame){fn, call->loc};
    /* hide the caller's local bindings; a name may not be redeclared while visible, and the
     * body must not depend on the caller's names */
    int hide = s->top_nscope < s->nscope ? s->top_nscope : s->nscope, mark = s->nscope;
    for (int i = hide; i < mark; i++) names_remove(s->names, s->scopes[i]->name);
    bool bound = true;
    for (int i = 0; i < fn->params.n && bound; i++) {
        const Expr *pn = fn->params.v[i];
        Symbol *sym = declare(s, SYM_VALUE, pn->name, pn->loc);
        if (sym) sym->v = vals[i];
        else bound = false;
    }
    if (bound) exec_list(s, &fn->body, depth + 1);
    pop_scope(s, mark);
    for (int i = hide; i < mark; i++) {
        Symbol *h = s->scopes[i];
        Symbol *g = names_get(s->names, h->name);
        if (g) {   /* the body declared a global of the caller's name: it would shadow it */
            if (sema_error(s, g->loc, "'%s' is declared by '%s' but is also a name where it is "
                           "called", h->name, fn->name))
                diag_note(s->diag, h->loc.at, "the caller's '%s' is declared here", h->name);
            s->stopped = true;
            names_remove(s->names, h->name);
        }
        names_put(s->names, h->name, h);
    }
    s->ncalls--;
}

/* The top-level `def` of `name` (called before it ran), or NULL. Op statements run millions of
 * times in big programs: this looks only at the defs, usually none or a few. */
static const Stmt *later_def(Sema *s, const char *name) {
    for (int i = 0; i < s->ndefs; i++)
        if (strcmp(s->defs[i]->name, name) == 0) return s->defs[i];
    return NULL;
}

static void exec_stmt(Sema *s, const Stmt *st, int depth) {
    if (sema_halted(s)) return;
    /* an op inside a function: the passes' errors at it will name the call (first one) */
    if (s->ncalls > 0 && (st->kind == ST_OP || st->kind == ST_PIPELINE) &&
        pos_add(s->call_sited, st->loc.at)) {
        const struct CallFrame *f = &s->calls[s->ncalls - 1];
        diag_add_call_site(s->diag, st->loc.at, f->loc.at, f->fn->name);
    }
    if (st->kind == ST_OP && st->e->kind == EX_CALL && st->e->a->kind == EX_NAME) {
        const char *name = st->e->a->name;
        Symbol *sym = lookup(s, name);
        if (sym && sym->kind == SYM_FUNC) {
            exec_call(s, st, sym, depth);
            return;
        }
        const Stmt *d = sym ? NULL : later_def(s, name);
        if (d) {
            if (sema_error(s, st->e->loc, "'%s' is called before its definition", name))
                def_note(s, d);
            return;
        }
    }
    switch (st->kind) {
    case ST_DEF:
        exec_def(s, st, depth);
        return;
    case ST_PARAM:
        exec_param(s, st, depth);
        return;
    case ST_REQUIRE: {
        int64_t v;
        if (!sema_eval_int(s, st->e, &v)) return;
        if (!v) {
            if (st->msg) sema_error(s, st->loc, "requirement failed: %s", st->msg);
            else sema_error(s, st->loc, "requirement failed");
            s->stopped = true;
        }
        return;
    }
    case ST_LET: {
        Value v;
        if (!sema_eval(s, st->e, &v)) return;
        Symbol *sym = declare(s, SYM_VALUE, st->name, st->loc);
        if (sym) sym->v = v;
        return;
    }
    case ST_PROGRAM:
        if (depth > 0) {
            sema_error(s, st->loc, "the 'program' header must be at the top level");
            return;
        }
        exec_program(s, st);
        return;
    case ST_SCRATCH:
        exec_scratch(s, st, depth);
        return;
    case ST_CHANNEL:
        exec_channel(s, st);
        return;
    case ST_SEMAPHORE:
        exec_semaphore(s, st);
        return;
    case ST_FOR: {
        ForCtx f = {&st->body, depth + 1};
        iterate(s, &st->iters, 0, st->e, for_body, &f);
        return;
    }
    case ST_IF: {
        int64_t c;
        if (!sema_eval_int(s, st->e, &c)) return;
        exec_list(s, c ? &st->body : &st->orelse, depth + 1);
        return;
    }
    case ST_OP:
        if (!s->plan) {
            sema_error(s, st->loc, "operation before the 'program' header");
            return;
        }
        lower_op(s, st);
        return;
    case ST_PIPELINE:
        if (!s->plan) {
            sema_error(s, st->loc, "operation before the 'program' header");
            return;
        }
        lower_pipeline(s, st);
        return;
    }
}

static void exec_list(Sema *s, const AstList *body, int depth) {
    if (depth >= SEMA_MAX_DEPTH / 4) {
        if (body->n) sema_error(s, ((Stmt *)body->v[0])->loc, "blocks nested more than %d deep", SEMA_MAX_DEPTH / 4);
        return;
    }
    int mark = s->nscope;
    for (int i = 0; i < body->n; i++) exec_stmt(s, body->v[i], depth);
    if (depth > 0) pop_scope(s, mark);
}

void sema_exec_block(Sema *s, const AstList *body) {
    exec_list(s, body, 1);
}

bool sema_run(Sema *s, const AstProgram *prog) {
    s->elems = arena_must(s->arena, sizeof *s->elems);
    s->define_used = arena_must(s->arena, (size_t)(s->opt->ndefines + 1) * sizeof(bool));
    /* a bad token already has its error: do not add a second one at the same place */
    s->names = names_new(s->arena);
    s->reported = pos_new(s->arena);
    s->call_sited = pos_new(s->arena);
    for (int i = 0; i < prog->nlex_errors; i++) pos_add(s->reported, prog->lex_errors[i]);
    for (int i = 0; i < prog->stmts.n; i++)
        if (((const Stmt *)prog->stmts.v[i])->kind == ST_DEF) s->ndefs++;
    if (s->ndefs > 0) {
        s->defs = arena_must(s->arena, (size_t)s->ndefs * sizeof *s->defs);
        int k = 0;
        for (int i = 0; i < prog->stmts.n; i++)
            if (((const Stmt *)prog->stmts.v[i])->kind == ST_DEF) s->defs[k++] = prog->stmts.v[i];
    }
    for (int i = 0; i < prog->stmts.n; i++) {
        exec_stmt(s, prog->stmts.v[i], 0);
        s->top_nscope = s->nscope;
    }
    for (int i = 0; i < s->opt->ndefines && !s->stopped; i++)
        if (!s->define_used[i])
            diag_error(s->diag, (PlanLoc){0, 0}, "-D %s: the program declares no 'param %s'",
                       s->opt->defines[i].name, s->opt->defines[i].name);
    if (!s->plan && diag_errors(s->diag) == 0)
        diag_error(s->diag, (PlanLoc){1, 1}, "no 'program' header (program NAME { collective ...; ranks ... })");
    if (diag_errors(s->diag) == 0) lower_finish(s);
    return diag_errors(s->diag) == 0;
}
