/*
 * boot_env.c - joining a group described by launcher environment variables (ours, torchrun's,
 * Open MPI's, Slurm's) instead of a BootId: rank 0 runs the root on the master port, the
 * secret comes from MSCCLRT_BOOT_SECRET or, weaker, from the port itself. Every number goes
 * through param_parse_int: decimal, range-checked, a bad one an error naming the variable.
 */
#include "bootstrap/boot_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First variable of names[] that is set and non-empty; *which gets its name. */
static const char *env_first(const char *const *names, const char **which) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) { *which = names[i]; return v; }
    }
    *which = NULL;
    return NULL;
}

/* The first of names[] that is set, parsed strictly into [lo, hi]; *found says whether any was. */
static mscclrt_result env_int(const char *const *names, long long lo, long long hi, int *out,
                              bool *found) {
    const char *which, *v = env_first(names, &which);
    *found = v != NULL;
    if (!v) return MSCCLRT_SUCCESS;
    long long x;
    TRY(param_parse_int(which, v, lo, hi, &x));
    *out = (int)x;
    return MSCCLRT_SUCCESS;
}

mscclrt_result boot_init_env(Boot **out) {
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", NULL};
    static const char *const local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", NULL};
    static const char *const port_vars[] = {"MASTER_PORT", NULL};
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_init_env: out is NULL");
    *out = NULL;

    const char *host = param_str(PARAM_MASTER_ADDR);
    if (!*host) host = getenv("MASTER_ADDR");
    long long port_param, wait_ms;
    TRY(param_int(PARAM_MASTER_PORT, &port_param));   /* 0: unset */
    TRY(param_int(PARAM_BOOT_TIMEOUT_MS, &wait_ms));
    int port = (int)port_param, rank = -1, size = -1, local = -1;
    bool have_port = port > 0, have_rank, have_size, have_local;
    if (!have_port) TRY(env_int(port_vars, PARAM_MIN_MASTER_PORT, PARAM_MAX_MASTER_PORT, &port, &have_port));
    TRY(env_int(rank_vars, 0, BOOT_MAX_RANKS - 1, &rank, &have_rank));
    TRY(env_int(size_vars, 1, BOOT_MAX_RANKS, &size, &have_size));
    TRY(env_int(local_vars, 0, BOOT_MAX_RANKS - 1, &local, &have_local));
    char missing[256] = "";
    if (!host || !*host) strcat(missing, " MSCCLRT_MASTER_ADDR/MASTER_ADDR");
    if (!have_port) strcat(missing, " MSCCLRT_MASTER_PORT/MASTER_PORT");
    if (!have_rank) strcat(missing, " RANK/OMPI_COMM_WORLD_RANK/SLURM_PROCID");
    if (!have_size) strcat(missing, " WORLD_SIZE/OMPI_COMM_WORLD_SIZE/SLURM_NTASKS");
    if (missing[0])
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "boot_init_env: the environment does not describe a "
                       "group; missing:%s", missing);
    if (rank >= size)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_init_env: rank %d out of range [0, %d) (the "
                       "group size)", rank, size);

    BootIdWire w;
    memset(&w, 0, sizeof w);
    w.magic = BOOT_MAGIC;
    w.version = BOOT_VERSION;
    TRY(boot_addr_resolve(&w.root, host, port, "master address"));
    /* The secret: MSCCLRT_BOOT_SECRET when given. Otherwise only the port is shared by every
     * rank, so the secret is derived from it: it keeps out stray and stale connections, not
     * anyone who can see the port. */
    const char *text = param_str(PARAM_BOOT_SECRET);
    char port_text[32];
    if (!*text) {
        snprintf(port_text, sizeof port_text, "port:%d", port);
        text = port_text;
    }
    boot_derive_secret(w.secret, text);

    if (rank == 0) {
        BootAddr any;
        memset(&any, 0, sizeof any);
        any.family = w.root.family;   /* all-zero address = every interface */
        any.port_be[0] = w.root.port_be[0], any.port_be[1] = w.root.port_be[1];
        int fd;
        BootAddr bound;
        if (boot_listen(&any, true, &fd, &bound) != MSCCLRT_SUCCESS) {
            char why[512];
            snprintf(why, sizeof why, "%s", mscclrt_last_error());
            return rt_fail(MSCCLRT_ERR_SYSTEM, "boot_init_env: rank 0 cannot run the root on port %d (%s); "
                           "set MSCCLRT_MASTER_PORT to a free port", port, why);
        }
        TRY(boot_root_start(fd, &bound, w.secret, (int)wait_ms));
    }
    BootId id;
    memcpy(id.bytes, &w, sizeof w);
    TRY(boot_init(out, &id, rank, size, 0));
    if (have_local && local != boot_local_rank(*out))
        LOG_WARN("boot: rank %d: the launcher's local rank is %d but host identities give %d "
                 "(local size %d); using %d", rank, local, boot_local_rank(*out), boot_local_size(*out),
                 boot_local_rank(*out));
    return MSCCLRT_SUCCESS;
}
