/*
 * bootstrap.h - the TCP rendezvous that turns nranks processes (or threads) into a group, and
 * the small host-side collectives built on it (allgather, tagged send/recv, barrier). Everything
 * above it (communicators, the IPC/RDMA transports, the proxy) exchanges its setup data here.
 *
 * Overview (as NCCL's bootstrap):
 *   1. A BootId names a root: an address, a port and a 32-byte secret. boot_get_unique_id()
 *      (called once, usually on rank 0) starts a detached root thread listening there and
 *      fills the id; the id is then handed to every rank by the application (MPI_Bcast, a
 *      file, torch.distributed...). boot_init_env() needs no id: rank 0 starts the root on
 *      MSCCLRT_MASTER_ADDR/PORT (torchrun's MASTER_ADDR/MASTER_PORT) and the secret comes from
 *      MSCCLRT_BOOT_SECRET or, failing that, from the port (a weaker guarantee: anything that
 *      knows the port can join; it only keeps stray or stale connections out).
 *   2. Every rank opens its own listening socket, connects to the root and sends a hello
 *      (rank, nranks, listening address, host identity, secret). The root refuses and logs a
 *      connection that does not present the secret, and keeps waiting for the real ranks. When
 *      all nranks have arrived it sends everyone the table of addresses and host identities;
 *      on timeout it tells those who came which ranks did not. A root too busy to read a hello
 *      (flooded, out of descriptors) answers BK_BUSY and the rank connects again.
 *   3. Afterwards ranks talk directly: a rank connects to a peer the first time it sends to it
 *      (one TCP connection per ordered pair, authenticated with the secret). Messages carry a
 *      magic, a version, the sender, a tag and a length, all checked by the receiver; messages
 *      that arrive before they are asked for wait in a queue, so send/recv match by
 *      (peer, tag) in FIFO order and never deadlock on socket buffers (a blocked send keeps
 *      draining incoming data). While a rank connects to a peer it keeps accepting and reading
 *      on its own listener too, so ranks that connect to each other under a flood never wait
 *      on one another.
 *
 * The ports accept connections from anyone who can reach them. Until a connection has
 * presented the secret it is bounded in number (BOOT_PENDING_MAX; a newer one evicts the
 * oldest), in time (BOOT_HELLO_WAIT_MS) and in memory (fixed slots), running out of descriptors
 * evicts or pauses accepting instead of spinning, and refusals are logged at WARN at most once
 * a second (boot_internal.h). Authenticated peers are bounded too: a message carries at most
 * BOOT_MAX_MSG (16 MiB) bytes, its buffer grows only as bytes arrive, and at most BOOT_QUEUE_MAX
 * (32 MiB) of a peer's unrequested messages are queued; beyond that its connection is not read
 * until the caller asks for some of them (so a wait for a message that the peer sent after 32
 * MiB of others nobody asks for times out).
 *
 * Every wait is bounded by the Boot's timeout (boot_init's timeout_ms, or MSCCLRT_BOOT_TIMEOUT_MS,
 * default 30000) and fails with MSCCLRT_ERR_TIMEOUT and a message naming the rank(s) that did not
 * answer. Nothing here needs a GPU.
 *
 * Thread safety: a Boot is used by one thread at a time (its rank's). Several Boots may live in
 * one process (thread mode: each thread calls boot_init with the same id and its own rank).
 */
#ifndef MSCCLRT_BOOTSTRAP_H
#define MSCCLRT_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mscclrt.h"

#define BOOT_ID_BYTES 128
/* Opaque to users; a magic-tagged wire struct inside (address, port, secret). Plain bytes:
 * copy it with memcpy, send it anywhere. */
typedef struct BootId { unsigned char bytes[BOOT_ID_BYTES]; } BootId;

typedef struct Boot Boot;

/* Makes a fresh id (random secret from getrandom) and starts the root thread that serves one
 * rendezvous on it. The root listens on the address of MSCCLRT_SOCKET_IFNAME (an interface
 * name or prefix, e.g. "eth0", "lo"), else of the first non-loopback interface that is up,
 * else 127.0.0.1. The root waits MSCCLRT_BOOT_TIMEOUT_MS for the first rank, then as long as
 * the arrived ranks are willing to wait; it exits when the rendezvous is done. */
mscclrt_result boot_get_unique_id(BootId *id);

/* Joins the group named by id as `rank` of `nranks`. timeout_ms <= 0 means
 * MSCCLRT_BOOT_TIMEOUT_MS; the value bounds this call and every later wait on the Boot.
 * On failure *out = NULL and the error names the cause (missing ranks, unreachable root...). */
mscclrt_result boot_init(Boot **out, const BootId *id, int rank, int nranks, int timeout_ms);

/* Joins a group described by the environment, in this order of preference:
 *   address: MSCCLRT_MASTER_ADDR, MASTER_ADDR       port: MSCCLRT_MASTER_PORT, MASTER_PORT
 *   rank:    RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID
 *   size:    WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS
 *   local:   LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID (checked against the
 *            host-identity grouping; a mismatch is a warning, boot_local_rank stays host-based)
 * Rank 0 runs the root, listening on every address at the port. MSCCLRT_ERR_INVALID_USAGE names
 * the variables that are missing; a number that is not decimal or out of range (ranks 0..65535,
 * sizes 1..65536, ports 1..65535) is MSCCLRT_ERR_INVALID_ARG naming the variable (param_parse_int). */
mscclrt_result boot_init_env(Boot **out);

/* Leaves the group and frees everything. NULL is a no-op. No collective step: peers that still
 * wait on this rank will see its connection close (MSCCLRT_ERR_REMOTE). */
void boot_close(Boot *b);

/* Every rank contributes per_rank bytes at buf + rank * per_rank; on return buf holds all
 * ranks' slices. Collective: all ranks call it in the same order. */
mscclrt_result boot_allgather(Boot *b, void *buf, size_t per_rank);
/* Returns when every rank has entered it. */
mscclrt_result boot_barrier(Boot *b);
/* Tagged point-to-point messages. Messages from one peer with one tag are received in the
 * order sent; different tags do not block each other. recv fails with MSCCLRT_ERR_REMOTE if the
 * peer sends a different length than len. peer may be the caller's own rank. len (and
 * allgather's per_rank) above 16 MiB is MSCCLRT_ERR_INVALID_ARG. */
mscclrt_result boot_send(Boot *b, int peer, int tag, const void *buf, size_t len);
mscclrt_result boot_recv(Boot *b, int peer, int tag, void *buf, size_t len);

int boot_rank(const Boot *b);
int boot_nranks(const Boot *b);
int boot_timeout_ms(const Boot *b);
/* Host grouping. Two ranks are on one node when their host identities are equal: hostname plus
 * /proc/sys/kernel/random/boot_id, or MSCCLRT_HOSTID when set (lets one host act as several
 * nodes in tests). Nodes are numbered by their lowest rank; local ranks by rank order. */
int boot_local_rank(const Boot *b);
int boot_local_size(const Boot *b);
int boot_node(const Boot *b);
int boot_nnodes(const Boot *b);
int boot_node_of(const Boot *b, int rank);   /* node of any rank; -1 if out of range */
int boot_pid_of(const Boot *b, int rank);    /* process id that rank reported; -1 if out of range */
/* 32 bytes shared by every member of the group (the id's secret): lets transports
 * authenticate their own side channels (e.g. IPC fd passing). */
const uint8_t *boot_secret(const Boot *b);

/* ---- for every listener of the runtime that anyone may reach (boot_net.c) --------------------
 * The bootstrap's ports and the socket transport's listener (runtime/net) refuse connections
 * that do not present the group's secret with the same three helpers. */
/* Whether two BOOT_SECRET_BYTES (32) secrets are equal, in time independent of where they differ
 * (a refused guess learns nothing about how close it came). */
bool boot_secret_equal(const uint8_t *a, const uint8_t *b);
/* Refusals of unauthenticated connections, logged at WARN at most once per BOOT_WARN_EVERY_MS
 * (1000); the line after a quiet spell says how many were not logged. Zero-initialise. */
typedef struct BootRate { int64_t next_ms; unsigned skipped; } BootRate;
#define BOOT_WARN_LIMITED(rate, ...) boot_warn_limited(rate, __FILE__, __LINE__, __VA_ARGS__)
void boot_warn_limited(BootRate *r, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether accept(2) failed because descriptors or kernel memory ran out (retrying at once
 * would fail again: the caller must free one or back off). */
bool boot_accept_exhausted(int err);

#endif
