/*
 * sema.h - the evaluator shared by sema.c (names, values, expressions, declarations, control flow,
 * compile-time checks) and lower.c (op statements -> per-rank, per-TB PlanOps in the Plan).
 * A .coll program is executed at compile time: loops and ifs run, and every op statement
 * reached appends ops to the plan. All memory is the compile's arena except the Plan itself.
 */
#ifndef MSCCLC_SEMA_H
#define MSCCLC_SEMA_H

#include "ast.h"
#include "diag.h"
#include "hash.h"
#include "mscclc.h"
#include "plan.h"

#define SEMA_MAX_DIMS 6        /* subscripts of a channel/semaphore array element */
#define SEMA_MAX_RANKS 4096    /* `ranks` header limit */
#define SEMA_MAX_TB 1024       /* thread block indices 0..1023 */
#define SEMA_MAX_TB_OPS 4096   /* ops lowered into one TB: far past the executor's 64 (whose
                                  located error comes from pass_check_limits), bounds memory */
/* Limits checked while the plan is built, so a hostile program stops as soon as it crosses one
 * (coll(5) LIMITS). Those of the plan loader (plan.h) make sure no accepted program produces a
 * plan the runtime refuses; the others bound what the compiler itself holds in memory. */
#define SEMA_MAX_OPS PLAN_MAX_TOTAL_OPS   /* ops lowered x instances (the loader's limit) */
#define SEMA_MAX_BYTES PLAN_MAX_FILE_BYTES /* JSON size of the lowered ops x instances */
#define SEMA_MAX_CHANNELS (1 << 20)       /* GPU-level channels: memory/port 1, switch 1 per member */
#define SEMA_MAX_SWITCHES (PLAN_MAX_TBS * PLAN_MAX_TB_CHANNELS)   /* switch channels in all */
#define SEMA_MAX_SEMAPHORES (1 << 20)
/* how the messages name the limits */
#define SEMA_LOADER_LIMIT "the plan loader's limit"
#define SEMA_OWN_LIMIT "the compiler's limit"
#define SEMA_BYTES_WHAT "bytes of JSON (256 MiB, counted as the plan is built, before fusion)"
#define SEMA_MIN_ALIGN 4       /* `alignment`: the plan loader's least buffer_alignment */
#define SEMA_MAX_ALIGN (1 << 20)

typedef struct Channel Channel;
typedef struct Semaphore Semaphore;
typedef struct Value Value;

typedef enum {
    V_INT,      /* i */
    V_STR,      /* s */
    V_LIST,     /* items[n] */
    V_RANGE,    /* lo, hi, step (half-open) */
    V_RANK,     /* rank */
    V_BUF,      /* a whole buffer of a rank: rank, buf (0 input, 1 output, 2+k scratch decl k) */
    V_CHUNK,    /* a chunk range; see below */
    V_CHAN,     /* chan */
    V_SEM,      /* sem */
} ValueKind;

struct Value {
    ValueKind kind;
    int64_t i;              /* V_INT */
    const char *s;          /* V_STR */
    Value *items;           /* V_LIST: [n] */
    int n;
    int64_t lo, hi, step;   /* V_RANGE */
    int rank;               /* V_RANK, V_BUF, V_CHUNK */
    int buf;                /* V_BUF, V_CHUNK: 0 input, 1 output, 2 + k = scratch declaration k */
    int64_t a, b;           /* V_CHUNK: the slice [a:b) as written, in the named buffer */
    PlanBuf type;           /* V_CHUNK: the plan buffer after in-place aliasing and scratch layout */
    uint32_t index, size;   /* V_CHUNK: chunk range in `type` */
    Channel *chan;          /* V_CHAN */
    Semaphore *sem;         /* V_SEM */
};

struct Channel {
    PlanChanType type;      /* memory, port or switch */
    const char *name;       /* "c[0][1]" for messages; made on first use (sema_chan_name) */
    const void *decl;       /* the array element that declared it (sema.c) */
    int src, dst;           /* memory/port: from src to dst */
    int gpu_index;          /* memory/port: GPU-level index on src */
    PlanBuf buf;            /* switch: buffer_type */
    int nranks;             /* switch members */
    int *ranks;             /* [nranks] */
    int *index_of;          /* switch: [Sema.nranks] GPU-level switch index per rank, -1 if not a member */
    bool named;             /* memory/port: some op lists it in channel_ids (so it needs a partner) */
    SrcLoc named_at;        /* the first such op */
};

struct Semaphore {
    const char *name;
    int rank;
    int id;                 /* index into gpus[rank].sem_init */
};

typedef struct {
    const char *name;
    int64_t chunks;         /* size */
    uint32_t offset;        /* first chunk in the rank's scratch */
    SrcLoc loc;
} ScratchDecl;

typedef struct Symbol Symbol;
typedef struct ElemTable ElemTable;
typedef struct PipeSlot PipeSlot;

typedef struct {
    Arena *arena;
    Diag *diag;
    const MscclcOptions *opt;
    Plan *plan;                 /* owned until handed to the caller; NULL before `program` */
    /* header */
    const char *name;
    SrcLoc program_loc;         /* the program's name in its header */
    PlanCollective coll;
    int nranks;
    int64_t chunk_factor;
    int64_t custom_in, custom_out;   /* `chunks in = A, out = B` (custom) */
    bool inplace;
    bool fusion;                /* header `fusion` (default on) */
    bool auto_sync;             /* header `auto_sync` (default on): run pass_auto_sync */
    int instances;
    int64_t in_chunks, out_chunks;   /* per rank, before replication */
    /* names: a name may not be redeclared while visible, so one table maps every visible name
     * to its declaration; globals (params, scratch, channel and semaphore arrays) stay in it */
    NameMap *names;
    Symbol **scopes;            /* let/loop bindings (innermost last); leaving a scope pops them */
    int nscope, capscope;
    Symbol *free_syms;          /* popped bindings, reused (a loop body's lets cost no memory per
                                   iteration) */
    Symbol **loops;             /* the loop variables being iterated (innermost last), for notes */
    int nloops, caploops;
    int top_nscope;             /* scopes[0, top_nscope) are top-level lets: what a function's
                                   body sees besides globals and its parameters */
    struct CallFrame *calls;    /* the function calls being expanded (innermost last), for notes
                                   and to refuse recursion */
    int ncalls, capcalls;
    PosSet *call_sited;         /* statements inside functions already given to
                                   diag_add_call_site */
    const Stmt **defs;          /* every top-level `def` of the program, to name a function
                                   called before its definition */
    int ndefs;
    int64_t iterations;         /* loop iterations so far (bounded) */
    int depth;                  /* expression/block nesting being evaluated (bounded: C stack) */
    int64_t nops;               /* ops lowered so far (bounded by SEMA_MAX_OPS) */
    int64_t nbytes;             /* their JSON size in the output form (bounded by SEMA_MAX_BYTES) */
    int64_t nchannels;          /* GPU-level channels declared (bounded by SEMA_MAX_CHANNELS) */
    int64_t nswitches;          /* switch channels declared (SEMA_MAX_SWITCHES) */
    int64_t nsems;              /* semaphores declared (SEMA_MAX_SEMAPHORES) */
    bool stopped;               /* stop executing: a `require` failed or a limit was crossed (the
                                   rest would only report follow-on errors), or the error limit
                                   was reached (sema_halted) */
    ElemTable *elems;           /* array elements of channel/semaphore arrays */
    Channel **chans;            /* memory and port channels in declaration order */
    int nchans, capchans;
    ScratchDecl *scratch;       /* [nscratch] */
    int nscratch, capscratch;
    uint32_t scratch_total;     /* chunks per rank */
    bool *define_used;          /* [opt->ndefines] */
    /* lowering */
    struct BarrierList *barriers;   /* [nranks]: each rank's distinct barrier TB lists (lower.c) */
    bool in_pipeline;
    uint64_t pipe_unit;
    uint32_t pipe_chunks;
    SrcLoc pipe_loc;
    PipeSlot *pipes;            /* open pipeline ops of the current pipeline block */
    int npipes, cappipes;
    /* diagnostics */
    PosSet *reported;           /* positions that already have an error (one error per position) */
} Sema;

/* sema.c */
/* Reports an error at `loc` unless one was already reported there (loops repeat statements);
 * true if it was reported (so a note may follow). */
bool sema_error(Sema *s, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Counts `n` more of what `limit` bounds into *count (x instances); past the limit, reports
 * "more than LIMIT WHAT, WHOSE" at `loc`, stops the evaluation and returns false. */
bool sema_charge(Sema *s, SrcLoc loc, int64_t *count, int64_t n, int64_t limit, const char *what,
                 const char *whose);
/* True once execution must stop (Sema.stopped, or the Diag's error limit was reached). */
bool sema_halted(Sema *s);
bool sema_eval(Sema *s, const Expr *e, Value *out);
/* Number of values of a V_RANGE (0 when empty; saturates instead of overflowing). */
int64_t sema_range_len(const Value *r);
bool sema_eval_int(Sema *s, const Expr *e, int64_t *out);
bool sema_eval_chunk(Sema *s, const Expr *e, Value *out);       /* V_CHUNK (a whole V_BUF too) */
bool sema_eval_chunk_list(Sema *s, const Expr *e, Value **items, int *n);
/* The bare word of an argument (`relaxed`, `sum`, `input`) or NULL if it is not a plain name. */
const char *sema_word(const Expr *e);
/* Runs the whole program: every statement, then the final checks. */
bool sema_run(Sema *s, const AstProgram *prog);
/* Executes a statement list in a new scope (used by lower.c for pipeline bodies). */
void sema_exec_block(Sema *s, const AstList *body);
/* The channel's name as declared ("c[0][1]"), formatted on first use (only messages need it). */
const char *sema_chan_name(Sema *s, Channel *c);
/* "rank 3's input", "rank 0's scratch 's'" */
const char *sema_buf_desc(Sema *s, int rank, int buf);

/* lower.c */
/* Creates the Plan once the header is known (false on a header the plan cannot express). */
bool lower_begin(Sema *s, SrcLoc loc);
/* `expr @ place` and `pipeline(...) { body }` statements. */
void lower_op(Sema *s, const Stmt *st);
void lower_pipeline(Sema *s, const Stmt *st);
/* Chunk counts, scratch size; false on an inconsistency. */
bool lower_finish(Sema *s);
void lower_release(Sema *s);

#endif
