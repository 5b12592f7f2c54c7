# nt_join.awk - rows files of nt_rows.awk ("bytes time busbw wrong" per size), one column each,
# joined by size: "bytes time1 time2 ... wrongs", sizes in the order they first appear, "-" where
# a file lacks the size (a run cut short), wrongs the sum of every file's #wrong at that size.
# Exits 1 when any value was wrong. Used by nt_sets.sh:  awk -f tests/gpu/nt_join.awk A.rows B.rows
FNR == 1 { f++ }
NF >= 4 {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    t[$1, f] = $2
    w[$1] += $4
    if ($4 != 0) bad = 1
}
END {
    for (i = 1; i <= n; i++) {
        s = order[i]
        line = sprintf("%12s", s)
        for (k = 1; k <= f; k++) line = line sprintf(" %10s", ((s, k) in t) ? t[s, k] : "-")
        print line sprintf(" %6d", w[s])
    }
    exit bad
}
