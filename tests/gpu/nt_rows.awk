# nt_rows.awk - the size lines of an nccl-tests log, one per size: "bytes time busbw wrong", time
# the better of out-of-place and in-place (an in-place "N/A" leaves out-of-place), busbw the
# chosen one's, wrong the two #wrong columns summed ("N/A" counts 0). Fields are counted from the
# end, so rows with and without the redop/root columns both parse; a line cut short is skipped.
# Used by nt_compare.sh and net_bench.sh:  awk -f tests/gpu/nt_rows.awk LOG
/^ +[0-9]+ +[0-9]+ +[a-z0-9_]+/ && NF >= 12 {
    to = $(NF - 7); ti = $(NF - 3); bo = $(NF - 5); bi = $(NF - 1)
    t = (ti != "N/A" && ti + 0 < to + 0) ? ti : to
    b = (t == ti) ? bi : bo
    printf "%s %s %s %d\n", $1, t, b, $(NF - 4) + ($NF == "N/A" ? 0 : $NF)
}
