/*
 * net_ib.h - what the files of the "ib" backend share: the libibverbs entry points opened with
 * dlopen (net_ib_verbs.c), the choice of device, port and GID (net_ib_dev.c). net_ib.c holds the
 * backend itself (queue pairs, registration, the data path).
 *
 * <infiniband/verbs.h> is included for its types only: libmscclrt never links libibverbs (a
 * machine without it must still load us), so every call goes through the table `iv`. Several
 * ibv_* names in that header are macros or static inlines (ibv_reg_mr, ibv_query_port,
 * ibv_post_send, ibv_poll_cq): the table holds the exported symbols under other field names, and
 * posting/polling go through the context's ops as the inlines do.
 */
#ifndef MSCCLRT_NET_IB_H
#define MSCCLRT_NET_IB_H

#include "net/net_internal.h"

#include <infiniband/verbs.h>

/* X-macro: (field, exported symbol, return type, parameters). All are required. */
#define IB_VERBS_FUNCTIONS(X) \
    X(get_device_list, "ibv_get_device_list", struct ibv_device **, (int *n)) \
    X(free_device_list, "ibv_free_device_list", void, (struct ibv_device **l)) \
    X(get_device_name, "ibv_get_device_name", const char *, (struct ibv_device *d)) \
    X(open_device, "ibv_open_device", struct ibv_context *, (struct ibv_device *d)) \
    X(close_device, "ibv_close_device", int, (struct ibv_context *c)) \
    X(query_device, "ibv_query_device", int, (struct ibv_context *c, struct ibv_device_attr *a)) \
    X(query_port, "ibv_query_port", int, (struct ibv_context *c, uint8_t port, struct ibv_port_attr *a)) \
    X(query_gid, "ibv_query_gid", int, (struct ibv_context *c, uint8_t port, int index, union ibv_gid *g)) \
    X(alloc_pd, "ibv_alloc_pd", struct ibv_pd *, (struct ibv_context *c)) \
    X(dealloc_pd, "ibv_dealloc_pd", int, (struct ibv_pd *pd)) \
    X(reg_mr, "ibv_reg_mr", struct ibv_mr *, (struct ibv_pd *pd, void *addr, size_t len, int access)) \
    X(dereg_mr, "ibv_dereg_mr", int, (struct ibv_mr *mr)) \
    X(create_cq, "ibv_create_cq", struct ibv_cq *, (struct ibv_context *c, int cqe, void *user, struct ibv_comp_channel *ch, int vector)) \
    X(destroy_cq, "ibv_destroy_cq", int, (struct ibv_cq *cq)) \
    X(create_qp, "ibv_create_qp", struct ibv_qp *, (struct ibv_pd *pd, struct ibv_qp_init_attr *a)) \
    X(modify_qp, "ibv_modify_qp", int, (struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)) \
    X(destroy_qp, "ibv_destroy_qp", int, (struct ibv_qp *qp))

/* Optional: NULL when the library is older (reg_dmabuf_mr: rdma-core 34; query_gid_ex: 32). */
#define IB_VERBS_OPTIONAL(X) \
    X(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", struct ibv_mr *, (struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd, int access)) \
    X(query_gid_ex, "_ibv_query_gid_ex", int, (struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e, uint32_t flags, size_t entry_size)) \
    X(wc_status_str, "ibv_wc_status_str", const char *, (enum ibv_wc_status s))

#define IB_TABLE_FIELD(field, sym, ret, params) ret (*field) params;
typedef struct IbVerbs {
    IB_VERBS_FUNCTIONS(IB_TABLE_FIELD)
    IB_VERBS_OPTIONAL(IB_TABLE_FIELD)
    char path[256];          /* the library that was opened */
} IbVerbs;
#undef IB_TABLE_FIELD

extern IbVerbs iv;           /* valid after ib_verbs_load() succeeded; read-only afterwards */

/* dlopen MSCCLRT_IBVERBS_LIB or libibverbs.so.1 once per process and resolve the table.
 * MSCCLRT_ERR_UNAVAILABLE naming the library and what is missing; the same on later calls. */
mscclrt_result ib_verbs_load(void);
/* The same load without an error (the automatic backend choice must not warn). */
bool ib_verbs_try(void);
/* ibv_wc_status_str when the library has it, else "status N" (buf holds it). */
const char *ib_status_name(enum ibv_wc_status s, char *buf, size_t len);

/* ==== device, port and GID (net_ib_dev.c) ==================================================== */
typedef struct IbDev {
    char name[64];           /* "mlx5_0" */
    int port;                /* physical port, 1-based */
    struct ibv_port_attr attr;
    int gid_index;           /* RoCE: the GID used; IB: -1 (LID addressing) */
    union ibv_gid gid;       /* RoCE: its value */
} IbDev;

/* One GID table entry as the choice sees it. type: -1 unknown, else IBV_GID_TYPE_*. */
typedef struct IbGidInfo {
    union ibv_gid gid;
    int type;
} IbGidInfo;

/* The GID index to use among n entries: RoCEv2 with an IPv4-mapped address, then RoCEv2 with a
 * routable (not link-local) IPv6 address, then any IPv4-mapped one, then any non-zero one (the
 * lowest index). -1 when every entry is empty. Pure: the tests call it directly. */
int ib_pick_gid(const IbGidInfo *g, int n);

/* Candidates: every (device, port) that passes MSCCLRT_IB_HCA and is ACTIVE, name-sorted, at
 * most max. Opens and closes each device. Needs ib_verbs_load(). quiet: report nothing (the
 * automatic choice); else a malformed MSCCLRT_IB_HCA is an error. */
mscclrt_result ib_dev_list(IbDev *out, int max, int *count, bool quiet);
/* The candidate this rank uses: the nearest to CUDA device cu_device (net_topo) unless
 * host_mem (then the first). Fills gid_index/gid for RoCE (MSCCLRT_IB_GID_INDEX overrides) from
 * the opened context ctx. rank names the caller in messages. */
mscclrt_result ib_dev_choose(int rank, bool host_mem, int cu_device, IbDev *d);
/* Fills d->gid_index and d->gid for an Ethernet (RoCE) port of the opened ctx; IB: -1. */
mscclrt_result ib_dev_gid(int rank, struct ibv_context *ctx, IbDev *d);

#endif
