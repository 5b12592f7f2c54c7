/*
 * fuzz_net.c - fuzz target of the socket transport's receiver checks (runtime/net/net_wire.c):
 * every header a peer could send is run through tcp_rx_check against a table of registered
 * regions backed by real heap buffers, and what it accepts is applied (a PUT's bytes written,
 * a SIGNAL's 8 bytes stored), so ASan reports any span the checks let past a region's end; the
 * same bytes go through tcp_hello_check, tcp_counts_check (a SIGNAL's per-socket counts) and
 * net_region_span, whose verdicts are checked against their contracts. Built with fuzz_driver.c: under libFuzzer (LLVMFuzzerTestOneInput), or with
 * -DFUZZ_STANDALONE as a program that replays files and mutates them with the header's
 * interesting values (mutate below):
 *   fuzz_net [-t seconds] [-r runs] [-s seed] [-o crash-file] file-or-dir...
 *
 * Input: 20 bytes of setup, then any number of 40-byte headers.
 *   [0] regions registered (0..5, mod 6)   [1] bit i: region i+1 released (owner NULL)
 *   [2] peer rank (mod 4)                  [3] socket index (mod 3)
 *   [4..11] count of the last SIGNAL/FLUSH  [12..19] highest FLUSH count sent (the ACK bound)
 * Regions 1-4 are heap buffers of 64, 4096, 8 and 0 bytes; region 5 is a never-written stand-in
 * for one of almost 2^64 bytes reaching the top of the address space (only the arithmetic is
 * checked there).
 */
#include "net/net_internal.h"
#include "fuzz_driver.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETUP 20
#define NREG 5
#define VIRTUAL 4           /* index of the stand-in region */
#define VIRTUAL_BASE 0x1000ull
/* the stand-in ends at the top of the address space, as far as a real one could: base + bytes
 * never wraps for memory that exists */
static const uint64_t reg_bytes[NREG] = {64, 4096, 8, 0, UINT64_MAX - VIRTUAL_BASE};

static unsigned long fuzz_accepted;  /* headers accepted, for the standalone driver's summary */

static uint64_t get64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Whether [addr, addr+len) lies inside region r (as registered), without wrapping. */
static bool inside(const NetRegion *r, uint64_t addr, uint64_t len) {
    return addr >= r->base && addr - r->base <= r->bytes && len <= r->bytes - (addr - r->base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < SETUP) return 0;
    NetRegion regs[NREG];
    void *mem[NREG] = {0};
    uint32_t nregs = data[0] % (NREG + 1);
    static const int owner = 1;
    for (uint32_t i = 0; i < NREG; i++) {
        memset(&regs[i], 0, sizeof regs[i]);
        regs[i].bytes = reg_bytes[i];
        if (i == VIRTUAL) {
            regs[i].base = VIRTUAL_BASE;
        } else {   /* exactly as large as registered: one byte beyond is ASan's */
            mem[i] = malloc(reg_bytes[i] ? reg_bytes[i] : 1);
            if (!mem[i]) abort();
            regs[i].base = (uint64_t)(uintptr_t)mem[i];
        }
        regs[i].owner = (data[1] >> i) & 1 ? NULL : &owner;
    }
    TcpRxState st = {.peer = data[2] % 4, .sock = data[3] % 3, .need = get64(data + 4),
                     .asked = get64(data + 12)};
    const bool remote[4] = {true, false, true, true};
    for (size_t at = SETUP; at + sizeof(TcpHdr) <= size; at += sizeof(TcpHdr)) {
        const uint8_t *h = data + at;
        char why[256];
        why[0] = '\0';
        TcpRx rx;
        if (!tcp_rx_check(h, &st, regs, nregs, &rx, why, sizeof why)) {
            if (!why[0]) fuzz_die("a header was refused without a reason", NULL);
        } else {
            fuzz_accepted++;
            const NetRegion *r = rx.region >= 1 && rx.region <= nregs ? &regs[rx.region - 1] : NULL;
            switch (rx.type) {
            case TCP_PUT:
                if (!r || !r->owner || rx.len == 0 || rx.len > TCP_PIECE || !inside(r, rx.addr, rx.len))
                    fuzz_die("a PUT outside a live region was accepted", why);
                if (r != &regs[VIRTUAL]) memset((void *)(uintptr_t)rx.addr, 0xa5, rx.len);
                break;
            case TCP_SIGNAL:
                if (!r || !r->owner || rx.off % 8 || !inside(r, rx.addr, 8) || st.sock != 0 ||
                    rx.count < st.need)
                    fuzz_die("a SIGNAL outside a live region, off socket 0 or going back was "
                             "accepted", NULL);
                if (r != &regs[VIRTUAL]) memcpy((void *)(uintptr_t)rx.addr, &rx.value, 8);
                st.need = rx.count;   /* as the receive thread does */
                break;
            case TCP_FLUSH:
                if (st.sock != 0 || rx.count < st.need) fuzz_die("a bad FLUSH was accepted", NULL);
                st.need = rx.count;
                break;
            case TCP_ACK:
                if (st.sock != 0 || rx.count > st.asked) fuzz_die("a bad ACK was accepted", NULL);
                break;
            case TCP_BYE:
                break;
            default:
                fuzz_die("an unknown message type was accepted", NULL);
            }
        }
        /* the same bytes as a HELLO to rank 3 of 4 (rank 1 is on this node) */
        uint32_t rank = 0, sock = 0;
        TcpHelloVerdict v = tcp_hello_check(h, 3, 4, remote, 2, &rank, &sock, why, sizeof why);
        if (v == TCP_HELLO_OK && (rank >= 3 || !remote[rank] || sock >= 2))
            fuzz_die("an unexpected HELLO was accepted", NULL);
        /* its fields as the per-socket counts after a SIGNAL/FLUSH of 3 sockets (arg the
         * total, the previous counts from the setup's "last count" spread over them): an
         * accepted set never drops below the previous one and sums to the total */
        {
            const uint64_t total = get64(h + 32), last = get64(data + 4);
            const uint64_t prev[3] = {last / 3, last / 3, last - 2 * (last / 3)};
            const uint64_t counts[3] = {get64(h + 16), get64(h + 24), total - get64(h + 16) - get64(h + 24)};
            if (tcp_counts_check(counts, 3, total, prev, why, sizeof why)) {
                uint64_t sum = 0;
                bool carry = false;
                for (int i = 0; i < 3; i++) {
                    if (counts[i] < prev[i]) fuzz_die("per-socket counts that drop were accepted", NULL);
                    carry |= sum + counts[i] < sum;
                    sum += counts[i];
                }
                if (carry || sum != total) fuzz_die("per-socket counts off their total were accepted", NULL);
            } else if (!why[0]) {
                fuzz_die("per-socket counts were refused without a reason", NULL);
            }
            why[0] = '\0';
        }
        /* and its fields as a span of a region */
        uint32_t id;
        uint64_t off = get64(h + 16), len = get64(h + 24), addr = 0;
        memcpy(&id, h + 12, 4);
        if (net_region_span(regs, nregs, id, off, len, &addr) &&
            (id == 0 || id > nregs || !regs[id - 1].owner || !inside(&regs[id - 1], addr, len)))
            fuzz_die("net_region_span accepted a span outside its region", NULL);
    }
    for (int i = 0; i < NREG; i++) free(mem[i]);
    return 0;
}

/* ---- the standalone driver's mutation (fuzz_driver.h) ------------------------------------- */

#define FUZZ_MAX_INPUT 4096

/* Values that sit on the checks' edges: region ids around the table and 2^31, offsets and
 * lengths around the regions' sizes, TCP_PIECE and 2^64. */
static const uint64_t edges[] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 56, 57, 63, 64, 65, 4088, 4089, 4095, 4096, 4097,
    TCP_PIECE - 1, TCP_PIECE, TCP_PIECE + 1, 0x7fffffff, 0x80000000u, 0x80000001u, 0xfffffffeu,
    0xffffffffu, 0x100000000ull, 1ull << 63, UINT64_MAX - 4095, UINT64_MAX - 8, UINT64_MAX - 7,
    UINT64_MAX - 1, UINT64_MAX, TCP_MAGIC, TCP_VERSION, TCP_SECRET,
};
/* Field offsets and widths of TcpHdr. */
static const struct { size_t off, width; } fields[] = {
    {0, 4}, {4, 2}, {6, 2}, {8, 4}, {12, 4}, {16, 8}, {24, 8}, {32, 8},
};

/* One header-aware mutation of buf (capacity FUZZ_MAX_INPUT) in place; returns the new length. */
static size_t mutate(uint8_t *buf, size_t len) {
    size_t nh = len > SETUP ? (len - SETUP) / sizeof(TcpHdr) : 0;
    switch (fuzz_rnd_below(8)) {
    case 0:   /* flip a bit anywhere */
        if (len) buf[fuzz_rnd_below(len)] ^= (uint8_t)(1u << fuzz_rnd_below(8));
        return len;
    case 1: case 2: case 3: {   /* an edge value into a field of a header (or the setup) */
        uint64_t v = edges[fuzz_rnd_below(sizeof edges / sizeof edges[0])];
        if (fuzz_rnd_below(4) == 0) v += (uint64_t)fuzz_rnd_below(3) - 1;
        if (!nh || fuzz_rnd_below(8) == 0) {
            if (len >= SETUP) memcpy(buf + 4 + 8 * fuzz_rnd_below(2), &v, 8);
            return len;
        }
        size_t f = fuzz_rnd_below(sizeof fields / sizeof fields[0]);
        memcpy(buf + SETUP + fuzz_rnd_below(nh) * sizeof(TcpHdr) + fields[f].off, &v,
               fields[f].width);
        return len;
    }
    case 4:   /* another message type */
        if (nh) {
            uint16_t t = (uint16_t)(1 + fuzz_rnd_below(7));
            memcpy(buf + SETUP + fuzz_rnd_below(nh) * sizeof(TcpHdr) + 6, &t, 2);
        }
        return len;
    case 5:   /* another table, peer or socket */
        if (len >= SETUP) buf[fuzz_rnd_below(4)] = (uint8_t)fuzz_rnd();
        return len;
    case 6: {   /* duplicate a header */
        if (!nh || len + sizeof(TcpHdr) > FUZZ_MAX_INPUT) return len;
        uint8_t h[sizeof(TcpHdr)];
        memcpy(h, buf + SETUP + fuzz_rnd_below(nh) * sizeof(TcpHdr), sizeof h);
        memcpy(buf + SETUP + nh * sizeof(TcpHdr), h, sizeof h);
        return SETUP + (nh + 1) * sizeof(TcpHdr);
    }
    default:   /* drop the last header */
        return nh ? SETUP + (nh - 1) * sizeof(TcpHdr) : len;
    }
}

static int edits(void) { return 1 + (int)fuzz_rnd_below(4); }

const FuzzTarget fuzz_target = {
    .name = "fuzz_net", .max_input = FUZZ_MAX_INPUT, .crash_path = "fuzz_net_crash.bin",
    .accepted = &fuzz_accepted, .accepted_what = "headers accepted", .mutate = mutate,
    .edits = edits,
};
