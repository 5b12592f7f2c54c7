/*
 * net_ib.c - the "ib" backend: port-channel data between nodes over RDMA (libibverbs).
 * Not finished in this revision: every entry fails with MSCCLRT_ERR_UNAVAILABLE, and the
 * automatic choice never picks it, so MSCCLRT_NET=ib is the only way to reach this message.
 */
#include "net/net_internal.h"
#include "core/err.h"

bool net_ib_usable(void) { return false; }

static mscclrt_result ib_connect(Net *n) {
    return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "net: rank %d: the RDMA (ib) transport is not "
                   "available in this build; use MSCCLRT_NET=socket", n->rank);
}

static void ib_close(Net *n) { (void)n; }

static mscclrt_result ib_unavailable(Net *n) {
    return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "net: rank %d: the RDMA (ib) transport is not "
                   "available in this build", n->rank);
}
static mscclrt_result ib_put(Net *n, const NetWindow *w, uint64_t off, uint64_t src,
                             uint64_t bytes) {
    (void)w, (void)off, (void)src, (void)bytes;
    return ib_unavailable(n);
}
static mscclrt_result ib_signal(Net *n, const NetWindow *w, uint64_t off, uint64_t value) {
    (void)w, (void)off, (void)value;
    return ib_unavailable(n);
}

const NetBackend net_ib = {
    .name = "ib", .code = NET_BACKEND_IB, .connect = ib_connect, .close = ib_close,
    .put = ib_put, .signal = ib_signal, .flush = ib_unavailable,
};
