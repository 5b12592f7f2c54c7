# net_trace.awk - the socket transport's stages from a MSCCLRT_DEBUG=TRACE log of ranks on two or
# more "nodes" (net_bench.sh with NB_DEBUG=TRACE writes one): every piece a rank queued for a
# peer, matched by (sender, receiver, socket, order) with its send's end at the sender's tx
# thread and its header and payload at the receiver's rx thread, and every signal matched by
# (sender, receiver, value) with its application. Prints one line per piece and per signal, in
# microseconds from the first trigger the proxies took, then the medians of each stage:
#   queued->sent   the piece waited for and went through the sender's socket
#   sent->landed   the receiver's thread read it (after the sender's send returned)
#   queued->landed the piece's whole trip
#   posted->applied a signal's trip (after the pieces it follows)
# and the gaps between consecutive pieces landing from one peer (the stream's pace).
#   awk -f tests/gpu/net_trace.awk LOG...
# Lines are "host:pid:tid mscclrt TRACE SUB ..."; a process's rank comes from its EXEC lines
# ("rank N:", at INFO or TRACE), so a log without them names processes by pid.

function tval(   i) {
    for (i = NF; i > 0; i--) if ($i ~ /^t=/) return substr($i, 3) + 0
    return -1
}
function pidof(   a) { split($1, a, ":"); return a[2] }
function rankof(pid) { return (pid in rank) ? rank[pid] : "pid" pid }
function after(word,   i) { for (i = 1; i < NF; i++) if ($i == word) return $(i + 1); return "" }
function num(s) { gsub(/[^0-9]/, "", s); return s + 0 }
function median(arr, n,   i, j, t) {
    if (n == 0) return -1
    for (i = 2; i <= n; i++) for (j = i; j > 1 && arr[j - 1] > arr[j]; j--) { t = arr[j]; arr[j] = arr[j - 1]; arr[j - 1] = t }
    return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}

# (EXEC's "rank N:" lines come at INFO as well as TRACE)
($3 == "TRACE" || $3 == "INFO") && $4 == "EXEC" && $5 == "rank" { rank[pidof()] = num($6) }

$3 == "TRACE" {
    t = tval(); if (t < 0) next
    p = pidof(); line = $0
    if ($4 == "PROXY" && line ~ / taken t=/) { if (t0 == "" || t < t0) t0 = t; next }
    if ($4 != "XPORT") next
    if (line ~ /message type 2 to rank .* (queued|sent inline)/) {
        peer = num(after("rank")); sock = num(after("socket"))
        k = p SUBSEP peer SUBSEP sock; nq[k]++; q[k, nq[k]] = t
        if (line ~ /sent inline/) { ns[k]++; s[k, ns[k]] = t }
        keys[k] = 1
    } else if (line ~ /message type 2 to rank .* sent by the tx thread/) {
        peer = num(after("rank")); sock = num(after("socket"))
        k = p SUBSEP peer SUBSEP sock; ns[k]++; s[k, ns[k]] = t
    } else if (line ~ /piece .* from rank .* landed/) {
        from = num(after("rank")); sock = num(after("socket"))
        k = p SUBSEP from SUBSEP sock; nl[k]++; ld[k, nl[k]] = t
    } else if (line ~ /signal .* to rank .* posted/) {
        v = after("signal"); peer = num(after("rank"))
        sp[p, peer, v] = t; sigs[p, peer, v] = 1
    } else if (line ~ /signal .* from rank .* applied/) {
        v = after("signal"); from = num(after("rank"))
        sa[p, from, v] = t
    }
}

END {
    if (t0 == "") t0 = 0
    # ranks by pid, and pids by rank (a piece's receiver is named by rank at the sender)
    for (p in rank) pid_of_rank[rank[p]] = p
    for (k in keys) {
        split(k, a, SUBSEP); src = a[1]; dst = a[2]; sock = a[3]
        dpid = (dst in pid_of_rank) ? pid_of_rank[dst] : ""
        for (i = 1; i <= nq[k]; i++) {
            lk = dpid SUBSEP rankof(src) SUBSEP sock
            landed = (dpid != "" && i <= nl[lk]) ? ld[lk, i] : -1
            sent = i <= ns[k] ? s[k, i] : -1
            printf "piece %s->%s socket %s #%d: queued %.1f sent %.1f landed %.1f\n", rankof(src), dst, sock,
                   i, q[k, i] - t0, sent < 0 ? -1 : sent - t0, landed < 0 ? -1 : landed - t0
            if (sent >= 0) qs[++nqs] = sent - q[k, i]
            if (sent >= 0 && landed >= 0) sl[++nsl] = landed - sent
            if (landed >= 0) ql[++nql] = landed - q[k, i]
        }
    }
    for (k in sigs) {
        split(k, a, SUBSEP); src = a[1]; dst = a[2]; v = a[3]
        dpid = (dst in pid_of_rank) ? pid_of_rank[dst] : ""
        ak = dpid SUBSEP rankof(src) SUBSEP v
        app = (ak in sa) ? sa[ak] : -1
        printf "signal %s->%s value %s: posted %.1f applied %.1f\n", rankof(src), dst, v, sp[k] - t0,
               app < 0 ? -1 : app - t0
        if (app >= 0) pa[++npa] = app - sp[k]
    }
    # the pace of each peer's stream: gaps between consecutive landings (all sockets)
    for (k in nl) {
        split(k, a, SUBSEP)
        for (i = 1; i <= nl[k]; i++) lt[a[1] SUBSEP a[2], ++nlt[a[1] SUBSEP a[2]]] = ld[k, i]
    }
    for (k in nlt) {
        m = nlt[k]
        for (i = 1; i <= m; i++) tmp[i] = lt[k, i]
        for (i = 2; i <= m; i++) for (j = i; j > 1 && tmp[j - 1] > tmp[j]; j--) { x = tmp[j]; tmp[j] = tmp[j - 1]; tmp[j - 1] = x }
        for (i = 2; i <= m; i++) gap[++ngap] = tmp[i] - tmp[i - 1]
    }
    printf "medians (us): queued->sent %.1f (%d), sent->landed %.1f (%d), queued->landed %.1f (%d), " \
           "signal posted->applied %.1f (%d), gap between landings %.1f (%d)\n",
           median(qs, nqs), nqs, median(sl, nsl), nsl, median(ql, nql), nql, median(pa, npa), npa,
           median(gap, ngap), ngap
}
