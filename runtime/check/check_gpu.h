/*
 * check_gpu.h - the pieces of a GPU check of one rank, shared by mscclrt_gpu_check_plan
 * (check_gpu.c: every rank of a single-process group) and mscclrt_gpu_check_rank
 * (check_gpu_rank.c: this process's rank only): the rank's buffers, the in-place restore, the
 * graph capture, waits with a deadline and the wording of a wrong result. Internal.
 */
#ifndef MSCCLRT_CHECK_GPU_H
#define MSCCLRT_CHECK_GPU_H

#include "check/check.h"
#include "exec/exec.h"

#define EXEC_CHECK_DEADLINE_S 15.0  /* longest wait for a rank's kernels */
#define EXEC_CHECK_REPLAYS 2        /* launches of the captured graph */

/* One rank's buffers of a check. */
typedef struct CheckGpuBufs {
    CuStream stream;
    CuDevPtr sbuf, rbuf;           /* allocations (rbuf 0 when in place) */
    size_t sbuf_size, rbuf_size;   /* their sizes; cuMem mappings when cumem */
    bool cumem;
    CuDevPtr pristine;             /* device copy of the input, restored before in-place calls */
    const void *send;
    void *recv;
    void *host_in, *host_out;
    CuGraphExec gexec;
    CuGraph graph;
} CheckGpuBufs;


/* Waits for a stream at most secs seconds: MSCCLRT_ERR_TIMEOUT names the rank and `what`. */
mscclrt_result check_gpu_sync(CuStream s, double secs, const char *what, int rank);

/* With the rank's context current: a stream, host buffers (the input is check_fill(chk->dtype,
 * chk->op, ..., chk->seed, rank)), device buffers laid out as spec §3.7 for in-place calls
 * (cuMem allocations of `device` when chk->cumem), the input copied in, the output filled
 * with 0xcd. b starts zeroed; on failure what was made
 * stays in b for check_gpu_release. */
mscclrt_result check_gpu_alloc(CheckGpuBufs *b, const Plan *p, int rank, int device,
                                const mscclrt_gpu_check *chk, size_t in, size_t out);
/* Queues the copy of the pristine input over the send buffer (in-place calls). Any context. */
mscclrt_result check_gpu_restore(mscclrt_comm *c, CheckGpuBufs *b, size_t in);
/* Refills the output with EXEC_CHECK_FILL on the stream, then starts capturing it (context current). */
mscclrt_result check_gpu_capture_begin(CheckGpuBufs *b, size_t in, size_t out);
/* Ends the capture (always, so the stream leaves capture mode); `so_far` is the result of the
 * captured calls and wins over the end's own. Then instantiates the graph. Context current. */
mscclrt_result check_gpu_capture_end(CheckGpuBufs *b, mscclrt_result so_far);
/* Copies the output to b->host_out (context current; stream finished). */
mscclrt_result check_gpu_fetch(CheckGpuBufs *b, size_t out);
/* The byte outputs are filled with before a checked call: an element still made of it was
 * never written. */
#define EXEC_CHECK_FILL 0xcd
/* The error of a wrong result of plan p: MSCCLRT_ERR_INTERNAL naming the call and the first
 * mismatch, the ops that write its chunk and whether it is still the fill (check_explain);
 * host_out is the output of rank mm->rank as fetched (may be NULL), in/out the per-rank sizes. */
mscclrt_result check_gpu_wrong(const Plan *p, const mscclrt_gpu_check *chk,
                                const CheckMismatch *mm, const void *host_out, size_t in,
                                size_t out);
/* check_gpu_rank.c: every rank's verdict to every rank over the bootstrap (its own tag, so a
 * peer still inside a collective setup is not confused). mine is this rank's result, its text
 * this thread's mscclrt_last_error(). Returns the same on every rank: success (*usec, if not
 * NULL, the largest my_usec), or the lowest failing rank's code and "rank R: " message, with
 * the count and list of failing ranks when several failed. A peer is waited for up to 10
 * minutes while it is alive; one that left is MSCCLRT_ERR_REMOTE at once. */
mscclrt_result check_gpu_agree(Boot *boot, mscclrt_result mine, double my_usec, double *usec);

/* Frees b (drops c's contexts of its buffers first). After a timeout the kernels may still
 * run: their memory, stream and contexts are left alone. Restores no context. */
void check_gpu_release(mscclrt_comm *c, CheckGpuBufs *b, bool timed_out);

#endif
