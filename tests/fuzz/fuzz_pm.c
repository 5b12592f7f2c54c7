/*
 * fuzz_pm.c - fuzz target of peer memory's checks on what a peer sends (runtime/peermem/
 * pm_wire.c, pm_msg_check): a stream of announcement and retirement messages from one peer is
 * run through the check against the state it guards (how many of the peer's messages were
 * applied, which of its slots hold a mapping), and what it accepts is applied as pm_map.c does;
 * every verdict is checked against the contract: numbers in order without gaps, a retirement only
 * of a held slot, an announcement only into a free slot and only of the peer's own whole
 * allocation, and a reason for every refusal. Built with fuzz_driver.c (libFuzzer, or
 * -DFUZZ_STANDALONE: fuzz_pm [-t seconds] [-r runs] [-s seed] [-o crash-file] file-or-dir...).
 *
 * Input: 8 bytes of setup, then any number of PmMsgWire messages (176 bytes each).
 *   [0] the peer's rank (mod 8)   [1..4] messages already applied (upto, little endian)
 *   [5] bit i: slot i starts held (slots 0..7; the others start free)
 */
#include "peermem/pm_internal.h"
#include "fuzz_driver.h"

#include <stdio.h>
#include <string.h>

#define SETUP 8

static unsigned long fuzz_accepted;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < SETUP) return 0;
    const int q = data[0] % 8;
    uint32_t upto;
    memcpy(&upto, data + 1, 4);
    uint64_t mapped[MN_PM_SLOTS] = {0};
    for (int i = 0; i < 8; i++) mapped[i] = (data[5] >> i) & 1 ? 0x1000u * (uint64_t)(i + 1) : 0;
    for (size_t at = SETUP; at + sizeof(PmMsgWire) <= size; at += sizeof(PmMsgWire)) {
        PmMsgWire m;
        memcpy(&m, data + at, sizeof m);
        char why[400];
        why[0] = '\0';
        if (!pm_msg_check(&m, q, upto, mapped, why, sizeof why)) {
            if (!why[0]) fuzz_die("a message was refused without a reason", NULL);
            if (strlen(why) >= sizeof why) fuzz_die("the reason overran its buffer", why);
            continue;
        }
        fuzz_accepted++;
        if (m.magic != PM_MAGIC || m.version != PM_VERSION) fuzz_die("a foreign message was accepted", NULL);
        if (upto == UINT32_MAX || m.pub != upto + 1) fuzz_die("a message out of order was accepted", NULL);
        if (m.slot >= MN_PM_SLOTS) fuzz_die("a slot out of range was accepted", NULL);
        if (m.kind == PM_RETIRE) {
            if (!mapped[m.slot]) fuzz_die("the retirement of a free slot was accepted", NULL);
            mapped[m.slot] = 0;
        } else if (m.kind == PM_ANNOUNCE) {
            if (mapped[m.slot]) fuzz_die("an announcement into a held slot was accepted", NULL);
            if (m.desc.owner_rank != q || m.desc.offset != 0 || m.desc.size == 0 ||
                m.desc.bytes > m.desc.size)
                fuzz_die("an announcement of memory not the peer's own whole allocation was accepted", NULL);
            mapped[m.slot] = 0x100000u + m.pub;   /* what a mapping would give */
        } else {
            fuzz_die("an unknown kind was accepted", NULL);
        }
        upto = m.pub;
    }
    return 0;
}

/* ---- the standalone driver's mutation (fuzz_driver.h) ------------------------------------- */

#define FUZZ_MAX_INPUT (SETUP + 16 * sizeof(PmMsgWire))

/* Values on the checks' edges: numbers around 0, 2^31 and 2^32, slots around MN_PM_SLOTS, the
 * kinds, magic and version, sizes around 0 and 2^64. */
static const uint64_t edges[] = {
    0, 1, 2, 3, 7, 8, 63, 64, 65, 0x7fffffff, 0x80000000u, 0xfffffffeu, 0xffffffffu,
    0x100000000ull, 1ull << 63, UINT64_MAX - 1, UINT64_MAX, PM_MAGIC, PM_VERSION, PM_ANNOUNCE,
    PM_RETIRE, IPC_DESC_MAGIC, IPC_DESC_VERSION,
};
/* Field offsets and widths of PmMsgWire (and of its descriptor's owner, offset, size, bytes). */
static const struct { size_t off, width; } fields[] = {
    {0, 4}, {4, 2}, {6, 2}, {8, 4}, {12, 4},
    {16 + offsetof(IpcDesc, owner_rank), 4}, {16 + offsetof(IpcDesc, size), 8},
    {16 + offsetof(IpcDesc, offset), 8}, {16 + offsetof(IpcDesc, bytes), 8},
};

static size_t mutate(uint8_t *buf, size_t len) {
    size_t nm = len > SETUP ? (len - SETUP) / sizeof(PmMsgWire) : 0;
    switch (fuzz_rnd_below(7)) {
    case 0:   /* flip a bit anywhere */
        if (len) buf[fuzz_rnd_below(len)] ^= (uint8_t)(1u << fuzz_rnd_below(8));
        return len;
    case 1: case 2: case 3: {   /* an edge value into a field of a message */
        if (!nm) return len;
        uint64_t v = edges[fuzz_rnd_below(sizeof edges / sizeof edges[0])];
        if (fuzz_rnd_below(4) == 0) v += (uint64_t)fuzz_rnd_below(3) - 1;
        const size_t f = fuzz_rnd_below(sizeof fields / sizeof fields[0]);
        memcpy(buf + SETUP + fuzz_rnd_below(nm) * sizeof(PmMsgWire) + fields[f].off, &v, fields[f].width);
        return len;
    }
    case 4:   /* another peer, count or held slots */
        if (len >= SETUP) buf[fuzz_rnd_below(6)] = (uint8_t)fuzz_rnd();
        return len;
    case 5: {   /* the next message: a copy of one with the following number */
        if (!nm || len + sizeof(PmMsgWire) > FUZZ_MAX_INPUT) return len;
        PmMsgWire m;
        memcpy(&m, buf + SETUP + fuzz_rnd_below(nm) * sizeof m, sizeof m);
        m.pub += 1;
        memcpy(buf + SETUP + nm * sizeof m, &m, sizeof m);
        return SETUP + (nm + 1) * sizeof m;
    }
    default:   /* drop the last message */
        return nm ? SETUP + (nm - 1) * sizeof(PmMsgWire) : len;
    }
}

static int edits(void) { return 1 + (int)fuzz_rnd_below(4); }

const FuzzTarget fuzz_target = {
    .name = "fuzz_pm",
    .max_input = FUZZ_MAX_INPUT,
    .crash_path = "crash-fuzz_pm",
    .accepted = &fuzz_accepted,
    .accepted_what = "messages accepted",
    .mutate = mutate,
    .edits = edits,
};
