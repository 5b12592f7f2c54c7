/*
 * pm_wire.c - whether a peer's peer-memory message may be applied: the checks on what another
 * process sent (pure: no driver, no channel), so the fuzz target tests/fuzz/fuzz_pm.c drives
 * them with every message a peer could forge, against the state they guard.
 */
#include "peermem/pm_internal.h"

#include <stdio.h>

bool pm_msg_check(const PmMsgWire *m, int q, uint32_t upto, const uint64_t *mapped, char *why,
                  size_t n) {
    if (m->magic != PM_MAGIC || m->version != PM_VERSION) {
        snprintf(why, n, "rank %d sent a message with magic 0x%08x version %u", q, m->magic,
                 m->version);
        return false;
    }
    /* numbers run 1, 2, ... without gaps (a wrap would need 2^32 messages: refused, as any
     * number but the next) */
    if (upto == UINT32_MAX || m->pub != upto + 1 || m->slot >= MN_PM_SLOTS) {
        snprintf(why, n, "rank %d sent message %u for slot %u (want message %u, slots below %d)", q,
                 m->pub, m->slot, upto + 1, MN_PM_SLOTS);
        return false;
    }
    if (m->kind == PM_RETIRE) {
        if (mapped[m->slot]) return true;
        snprintf(why, n, "rank %d retired slot %u, which holds nothing", q, m->slot);
        return false;
    }
    if (m->kind != PM_ANNOUNCE || mapped[m->slot]) {
        snprintf(why, n, "rank %d sent message %u of kind %u for slot %u%s", q, m->pub, m->kind,
                 m->slot, mapped[m->slot] ? ", which is taken" : "");
        return false;
    }
    /* an announcement describes a whole allocation of q's (ipc_desc_check looks at the rest) */
    const IpcDesc *d = &m->desc;
    if (d->owner_rank != q || d->offset != 0 || d->size == 0 || d->bytes > d->size) {
        snprintf(why, n, "rank %d announced an allocation of rank %d at offset %llu, %llu of %llu "
                 "bytes (want its own, whole)", q, (int)d->owner_rank, (unsigned long long)d->offset,
                 (unsigned long long)d->bytes, (unsigned long long)d->size);
        return false;
    }
    return true;
}
