/*
 * net_match.c - NCCL's syntax for lists of interfaces and HCAs (MSCCLRT_SOCKET_IFNAME,
 * MSCCLRT_IB_HCA): "mlx5_0:1,mlx5_1" selects by name prefix (and port), a leading '^' turns the
 * list into exclusions, a leading '=' (after the '^' if both) asks for exact names.
 */
#include "net/net.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>

mscclrt_result net_match_parse(const char *what, const char *text, NetMatchList *l) {
    memset(l, 0, sizeof *l);
    if (!text) return MSCCLRT_SUCCESS;
    const char *s = text;
    if (*s == '^') { l->exclude = true; s++; }
    if (*s == '=') { l->exact = true; s++; }
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == 0) { s += end ? 1 : 0; if (!end) break; continue; }   /* "a,,b": skip */
        if (l->n == NET_MATCH_MAX)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s='%s': more than %d entries", what, text,
                           NET_MATCH_MAX);
        const char *colon = memchr(s, ':', len);
        size_t nlen = colon ? (size_t)(colon - s) : len;
        if (nlen == 0 || nlen >= sizeof l->e[0].name)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s='%s': entry '%.*s' has %s name", what,
                           text, (int)len, s, nlen ? "a too long" : "an empty");
        memcpy(l->e[l->n].name, s, nlen);
        l->e[l->n].name[nlen] = 0;
        l->e[l->n].port = 0;
        if (colon) {
            const char *p = colon + 1, *pe = s + len;
            long port = 0;
            if (p == pe) port = -1;
            for (; p < pe && port >= 0; p++) {
                if (*p < '0' || *p > '9' || port > 65535) port = -1;
                else port = port * 10 + (*p - '0');
            }
            if (port <= 0 || port > 65535)
                return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s='%s': entry '%.*s': port must be a "
                               "number in [1, 65535]", what, text, (int)len, s);
            l->e[l->n].port = (int)port;
        }
        l->n++;
        s += len;
        if (*s == ',') s++;
    }
    return MSCCLRT_SUCCESS;
}

bool net_match(const NetMatchList *l, const char *name, int port) {
    if (!l || l->n == 0) return true;
    bool hit = false;
    for (int i = 0; i < l->n && !hit; i++) {
        const char *e = l->e[i].name;
        bool name_ok = l->exact ? strcmp(e, name) == 0 : strncmp(e, name, strlen(e)) == 0;
        hit = name_ok && (l->e[i].port == 0 || port == 0 || l->e[i].port == port);
    }
    return l->exclude ? !hit : hit;
}
