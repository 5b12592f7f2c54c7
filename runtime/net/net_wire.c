/*
 * net_wire.c - the checks a receiver of the socket backend applies to every message header
 * before it touches memory: pure functions of the header's bytes, the rank's table of
 * registered regions and what the connection has seen so far (no sockets, no locks, no
 * logging), so tests/fuzz/fuzz_net.c drives them directly. net_tcp_rx.c's receive threads and
 * the accept loop (net_accept.c) call them; a false verdict comes with the reason, which the
 * caller reports naming the peer.
 *
 * Every field is compared as an unsigned number with what this rank set up: a region id must
 * name a live region (id i+1 is regs[i]; ids of 2^31 and more are just large, never negative),
 * offsets and lengths are checked by subtraction (off <= bytes && len <= bytes - off), so no sum
 * can wrap, and fields a message type does not use must be zero.
 */
#include "net/net_internal.h"

#include <stdio.h>
#include <string.h>

bool net_region_span(const NetRegion *regs, uint32_t nregs, uint32_t id, uint64_t off, uint64_t len,
                     uint64_t *addr) {
    if (id == 0 || id > nregs) return false;
    const NetRegion *r = &regs[id - 1];
    if (!r->owner || off > r->bytes || len > r->bytes - off) return false;
    *addr = r->base + off;
    return true;
}

static const char *type_name(uint32_t t) {
    switch (t) {
    case TCP_HELLO: return "HELLO";
    case TCP_PUT: return "PUT";
    case TCP_SIGNAL: return "SIGNAL";
    case TCP_FLUSH: return "FLUSH";
    case TCP_ACK: return "ACK";
    case TCP_BYE: return "BYE";
    default: return "unknown";
    }
}

#define BAD(...) do { snprintf(why, whylen, __VA_ARGS__); return false; } while (0)

bool tcp_rx_check(const void *bytes, const TcpRxState *st, const NetRegion *regs, uint32_t nregs,
                  TcpRx *rx, char *why, size_t whylen) {
    TcpHdr h;
    memcpy(&h, bytes, sizeof h);   /* the receive buffer need not be aligned */
    memset(rx, 0, sizeof *rx);
    if (h.magic != TCP_MAGIC || h.version != TCP_VERSION)
        BAD("not a socket-transport message of this version (magic 0x%08x, version %u)", h.magic,
            h.version);
    if (h.rank != st->peer)
        BAD("%s claims to come from rank %u", type_name(h.type), h.rank);
    rx->type = h.type;
    switch (h.type) {
    case TCP_PUT:
        if (h.arg != 0) BAD("PUT with a nonzero argument %llu", (unsigned long long)h.arg);
        if (h.len == 0 || h.len > TCP_PIECE)
            BAD("PUT of %llu bytes (a piece has 1 to %u)", (unsigned long long)h.len, TCP_PIECE);
        if (!net_region_span(regs, nregs, h.region, h.off, h.len, &rx->addr))
            BAD("PUT of %llu bytes at offset %llu of region %u, which this rank has not "
                "registered that large (%u region slots)", (unsigned long long)h.len,
                (unsigned long long)h.off, h.region, nregs);
        rx->region = h.region;
        rx->off = h.off;
        rx->len = h.len;
        rx->host = regs[h.region - 1].host;   /* net_region_span checked the id */
        return true;
    case TCP_SIGNAL:
    case TCP_FLUSH:
        /* both travel on socket 0 only, in issue order: their counts never decrease */
        if (st->sock != 0) BAD("%s on socket %u (only socket 0 carries them)", type_name(h.type), st->sock);
        if (h.arg < st->need)
            BAD("%s counts %llu pieces sent before it, fewer than the %llu of an earlier one",
                type_name(h.type), (unsigned long long)h.arg, (unsigned long long)st->need);
        rx->count = h.arg;
        if (h.type == TCP_FLUSH) {
            if (h.region || h.off || h.len)
                BAD("FLUSH with nonzero unused fields (region %u, offset %llu, length %llu)",
                    h.region, (unsigned long long)h.off, (unsigned long long)h.len);
            return true;
        }
        if (h.off % 8 || !net_region_span(regs, nregs, h.region, h.off, 8, &rx->addr))
            BAD("SIGNAL of offset %llu of region %u, which this rank has not registered that "
                "large or which is not 8-byte aligned (%u region slots)",
                (unsigned long long)h.off, h.region, nregs);
        rx->region = h.region;
        rx->off = h.off;
        rx->value = h.len;
        return true;
    case TCP_ACK:
        if (st->sock != 0) BAD("ACK on socket %u (only socket 0 carries them)", st->sock);
        if (h.region || h.off || h.len)
            BAD("ACK with nonzero unused fields (region %u, offset %llu, length %llu)", h.region,
                (unsigned long long)h.off, (unsigned long long)h.len);
        if (h.arg > st->asked)
            BAD("ACK of %llu pieces, but this rank asked about %llu", (unsigned long long)h.arg,
                (unsigned long long)st->asked);
        rx->count = h.arg;
        return true;
    case TCP_BYE:
        if (h.region || h.off || h.len || h.arg) BAD("BYE with nonzero fields");
        return true;
    case TCP_HELLO:
        BAD("HELLO on a connection already introduced");
    default:
        BAD("unknown message type %u", h.type);
    }
}

uint32_t tcp_piece_socket(uint64_t put_bytes, uint32_t seq, uint32_t nsocks, bool control,
                          uint64_t wide_bytes) {
    if (put_bytes <= TCP_INLINE || nsocks <= 1) return 0;
    const uint32_t first = control ? 1 : 0;
    uint32_t n = nsocks - first;
    if (put_bytes < wide_bytes && n > TCP_NARROW_SOCKS) n = TCP_NARROW_SOCKS;
    return first + seq % n;
}

uint64_t tcp_piece_bytes(uint64_t put_bytes, uint64_t max_piece, uint64_t split_min, bool split,
                        bool idle) {
    if (!split || !idle || !tcp_put_splits(put_bytes, split_min)) return max_piece;
    uint64_t p = (put_bytes + TCP_SPLIT_PIECES - 1) / TCP_SPLIT_PIECES;
    p = (p + 4095) / 4096 * 4096;
    if (p < TCP_SPLIT_MIN) p = TCP_SPLIT_MIN;
    return p < max_piece ? p : max_piece;
}

bool tcp_counts_check(const uint64_t *counts, uint32_t nsocks, uint64_t total,
                      const uint64_t *prev, char *why, size_t whylen) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < nsocks; i++) {
        if (counts[i] < prev[i])
            BAD("socket %u's count %llu is below the %llu of an earlier one", i,
                (unsigned long long)counts[i], (unsigned long long)prev[i]);
        if (counts[i] > total - sum)
            BAD("they sum past the %llu pieces of its header", (unsigned long long)total);
        sum += counts[i];
    }
    if (sum != total)
        BAD("they sum to %llu, its header says %llu", (unsigned long long)sum,
            (unsigned long long)total);
    return true;
}

TcpHelloVerdict tcp_hello_check(const void *bytes, uint32_t me, uint32_t nranks, const bool *remote,
                                uint32_t nsocks, uint32_t *rank, uint32_t *sock, char *why,
                                size_t whylen) {
    TcpHdr h;
    memcpy(&h, bytes, sizeof h);
    *rank = h.rank;
    *sock = h.region;
    if (h.magic != TCP_MAGIC || h.version != TCP_VERSION || h.type != TCP_HELLO ||
        h.len != TCP_SECRET || h.arg != 0) {
        snprintf(why, whylen, "not a socket-transport hello of this version (magic 0x%08x, "
                 "version %u, type %u)", h.magic, h.version, h.type);
        return TCP_HELLO_MALFORMED;
    }
    /* only ranks below this one connect to it, and only from other nodes */
    if (h.rank >= me || h.rank >= nranks || !remote[h.rank]) {
        snprintf(why, whylen, "claims to be rank %u, which does not connect to rank %u", h.rank, me);
        return TCP_HELLO_UNEXPECTED;
    }
    if (h.off != nsocks) {
        snprintf(why, whylen, "rank %u uses %llu sockets per peer, rank %u uses %u (set "
                 "MSCCLRT_SOCKET_NSOCKS alike everywhere)", h.rank, (unsigned long long)h.off, me,
                 nsocks);
        return TCP_HELLO_NSOCKS;
    }
    if (h.region >= nsocks) {
        snprintf(why, whylen, "rank %u introduced socket %u of %u", h.rank, h.region, nsocks);
        return TCP_HELLO_UNEXPECTED;
    }
    return TCP_HELLO_OK;
}
