/*
 * check.h - verification: deterministic test inputs, and the postcondition checker of every
 * collective against a float64 (or exact integer) reference, for the CPU backend, mscclrt-run,
 * the GPU checks (check_gpu.c) and the tests. The data types' arithmetic is runtime/dtype.
 */
#ifndef MSCCLRT_CHECK_H
#define MSCCLRT_CHECK_H

#include "dtype/dtype.h"
#include "mscclrt.h"
#include "plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deterministic input of rank `rank` for `seed`: never all zeros, values chosen so that the
 * collective of `op` over at most 64 ranks stays finite in every type. Fails (filling nothing)
 * only when MSCCLRT_CHECK_THREADS is bad. */
mscclrt_result check_fill(mscclrt_dtype t, mscclrt_redop op, void *buf, size_t n, uint64_t seed, int rank);
/* Elements [first, first + n) of that same input into buf[0, n): element i depends only on
 * (seed, rank, i), so any slice can be regenerated without the rest. */
void check_fill_range(mscclrt_dtype t, mscclrt_redop op, void *buf, size_t first, size_t n,
                      uint64_t seed, int rank);

/* ---- collective postconditions ---------------------------------------------------------
 * inputs[r]: rank r's input as it was before the call (in_bytes); outputs[r]: rank r's output
 * buffer after the call (out_bytes). Reductions are checked against float64 (floats) or exact
 * modular (integers) references with a tolerance that fits the type and operator; everything
 * else must match bit for bit. broadcast: root 0; sendrecv: rank r receives the input of rank
 * (r-1+n)%n. The rooted collectives have root 0: reduce, root 0's output is the reduction of
 * every input; gather, root 0's output holds rank q's input at block q; scatter, rank q's output
 * is block q of root 0's input; the other ranks' outputs of reduce and gather are not checked. On a mismatch returns false and fills *mm with the first one (by rank, element);
 * when it cannot check (a bad MSCCLRT_CHECK_THREADS, no memory) returns false with mm->rank -1. */
typedef struct {
    int rank;
    size_t elem;
    double got, expected, tolerance;
    char msg[512];              /* one line naming all of the above */
} CheckMismatch;

/* The byte every output is filled with before a checked call (mscclrt-run, the check helpers):
 * an element still made of it was never written. */
#define CHECK_FILL_BYTE 0xa5

/* ---- check_bufs.c: the per-rank host buffers of a checked CPU call ---------------------------- */
typedef struct {
    int nranks;
    size_t in_bytes, out_bytes;   /* per rank */
    void **send, **recv;          /* [nranks]: the call's buffers, inside own/own_send */
    unsigned char **inputs;       /* [nranks], owned: each input as it was before the call */
    unsigned char **own;          /* [nranks], owned: the output (in place: the one buffer) */
    unsigned char **own_send;     /* [nranks], owned: the input when not in place, else NULL */
} CheckBufs;

/* nranks buffer sets for calls of in_bytes/out_bytes per rank; in place, one buffer per rank
 * of max(in, out) bytes with allgather's input and reducescatter's output at the rank's block
 * (spec §3.7). false when out of memory (nothing is left allocated). */
bool check_bufs_alloc(CheckBufs *b, PlanCollective coll, int nranks, size_t in_bytes,
                      size_t out_bytes, bool inplace);
/* Before a call: every output filled with CHECK_FILL_BYTE, every input made by check_fill from
 * seed (rank r's with rank r) and kept in inputs[r]. Fails as check_fill does. */
mscclrt_result check_bufs_fill(CheckBufs *b, mscclrt_dtype t, mscclrt_redop op, uint64_t seed);
/* Frees everything; a zeroed or already freed CheckBufs is a no-op. */
void check_bufs_free(CheckBufs *b);

/* check_cpu.c: why rank `rank`'s element `elem` (elem_bytes each; `value` points at it, may be
 * NULL) of a call of in_bytes/out_bytes per rank can be wrong, as text to append to a mismatch
 * message ("; output chunk 3 of rank 1 is written by rank 0 tb 0 op 5 (put)", and whether the
 * value is still fill_byte, the byte the output was filled with before the call; -1: none).
 * Empty when the geometry does not resolve. */
void check_explain(const Plan *p, bool inplace, int rank, size_t elem, size_t elem_bytes,
                   const void *value, int fill_byte, uint64_t in_bytes, uint64_t out_bytes,
                   char *text, size_t len);

bool check_collective(PlanCollective coll, int nranks, mscclrt_dtype t, mscclrt_redop op,
                      const void *const *inputs, size_t in_bytes, const void *const *outputs,
                      size_t out_bytes, CheckMismatch *mm);
/* Whether check_collective knows the postcondition of coll (false for test/custom). */
bool check_collective_known(PlanCollective coll);

/* ---- one rank at a time, inputs read block by block ----------------------------------------
 * check_collective is rank by rank check_rank_from over inputs held in memory; check_rank_from
 * reads the inputs through `in`, which returns rank q's elements [first, first + n) (n at most
 * block_bytes / element size) or NULL if it cannot (the check then fails with mm->rank = -1).
 * A returned slice must stay valid until the next request for the same rank: reductions hold
 * one slice of every rank at once. Same reference, tolerances, order and messages as
 * check_collective: the first mismatch of `rank` by element. */
typedef const void *(*CheckInputFn)(void *ctx, int rank, size_t first, size_t n);
bool check_rank_from(PlanCollective coll, int nranks, int rank, mscclrt_dtype t, mscclrt_redop op,
                     CheckInputFn in, void *ctx, size_t block_bytes, size_t in_bytes,
                     const void *output, size_t out_bytes, CheckMismatch *mm);

/* check_rank_from over `nthreads` threads: output elements split into contiguous ranges of
 * whole blocks, range i read through ctxs[i] (one context per thread: `in` may keep state in
 * it). Same result and first mismatch as check_rank_from. */
bool check_rank_threads(PlanCollective coll, int nranks, int rank, mscclrt_dtype t,
                        mscclrt_redop op, CheckInputFn in, void *const *ctxs, int nthreads,
                        size_t block_bytes, size_t in_bytes, const void *output,
                        size_t out_bytes, CheckMismatch *mm);

/* check_threads.c: how many threads a check or fill of `elems` elements uses (one per online
 * CPU or MSCCLRT_CHECK_THREADS, at most MAX_CHECK_THREADS, and none idle for want of work;
 * *nt is 1 when MSCCLRT_CHECK_THREADS is bad, which is MSCCLRT_ERR_INVALID_ARG), and job(arg, i)
 * for every i in [0, n) on n threads, the caller's included; a thread that cannot start has its
 * job run by the caller, so every job always runs. */
#define MAX_CHECK_THREADS 32
mscclrt_result check_threads(size_t elems, int *nt);
void check_run_threads(int n, void (*job)(void *arg, int i), void *arg);

/* check_rank.c: rank `rank`'s output after a call whose every input was check_fill(t, op, ...,
 * seed, q), checked without anyone's whole input: the needed pieces of every rank's input are
 * regenerated a block (CHECK_BLOCK_BYTES, less for very large groups) at a time, so memory is
 * O(nranks x block). For one process per rank. */
#define CHECK_BLOCK_BYTES ((size_t)1 << 20)
bool check_collective_rank(PlanCollective coll, int nranks, int rank, mscclrt_dtype t,
                           mscclrt_redop op, uint64_t seed, size_t in_bytes, const void *output,
                           size_t out_bytes, CheckMismatch *mm);

#endif
