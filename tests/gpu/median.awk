# median.awk - lines "key value [wrong]" from several runs -> one line per key, in first-seen
# order: "key median" (the lower middle of an even count, as the run printed it), and where the
# lines carry a third field, the largest of it (a "-" is kept until a larger number comes). Used by net_bench.sh (rows of
# nt_rows.awk) and torch_bench.sh (its rows keyed by collective, dtype, bytes and mode):
#   awk -f tests/gpu/median.awk RUN1 RUN2 ...
{
    if (!($1 in n)) order[++keys] = $1
    v[$1, ++n[$1]] = $2
    if (NF >= 3 && (!($1 in w) || $3 + 0 > w[$1] + 0 || $3 == "-")) w[$1] = $3
}
END {
    for (i = 1; i <= keys; i++) {
        k = order[i]; m = n[k]
        for (a = 1; a <= m; a++) x[a] = v[k, a]
        for (a = 2; a <= m; a++) {   # insertion sort: a handful of runs
            t = x[a]
            for (b = a - 1; b >= 1 && x[b] + 0 > t + 0; b--) x[b + 1] = x[b]
            x[b + 1] = t
        }
        if (k in w) print k, x[int((m + 1) / 2)], w[k]
        else print k, x[int((m + 1) / 2)]
    }
}
