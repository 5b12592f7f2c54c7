#!/bin/sh
# net_trace.sh - tests/gpu/net_trace.awk (the socket transport's stages from a TRACE log) on a
# small log of two ranks written here: pieces matched by sender, receiver, socket and order,
# a signal by value, the medians of every stage and the pace of the landings; a rank named by
# an INFO line of EXEC as well as a TRACE one (a TRACE log of the drop-in has only the former).
cd "$(dirname "$0")/../.." || exit 2
tmp=${TMPDIR:-/tmp}/net_trace.$$
trap 'rm -f "$tmp".*' EXIT
cat >"$tmp.log" <<'LOG'
h:100:100 mscclrt TRACE EXEC rank 0: sendrecv of 1048576 bytes
h:200:200 mscclrt INFO EXEC rank 1: context of plan 'mscclrt-native-context' set up in 0.73 ms
h:100:7 mscclrt TRACE PROXY trigger #0: kind 1 dst 0x1 src 0x2 bytes 1048576 taken t=1000.0
h:100:7 mscclrt TRACE XPORT net: message type 2 to rank 1 (len/value 524288, socket 0) queued (0 bytes written inline) t=1010.0
h:100:7 mscclrt TRACE XPORT net: message type 2 to rank 1 (len/value 524288, socket 1) queued (0 bytes written inline) t=1012.0
h:100:8 mscclrt TRACE XPORT net: message type 2 to rank 1 (len/value 524288, socket 0) sent by the tx thread t=1110.0
h:100:9 mscclrt TRACE XPORT net: message type 2 to rank 1 (len/value 524288, socket 1) sent by the tx thread t=1132.0
h:200:5 mscclrt TRACE XPORT net: piece 1 from rank 0 (524288 bytes at offset 0 of region 3, socket 0) landed t=1150.0
h:200:6 mscclrt TRACE XPORT net: piece 2 from rank 0 (524288 bytes at offset 524288 of region 3, socket 1) landed t=1182.0
h:100:7 mscclrt TRACE XPORT net: signal 4 to rank 1 (after 2 pieces) posted t=1020.0
h:200:5 mscclrt TRACE XPORT net: signal 4 from rank 0 (after 2 pieces) applied t=1190.0
LOG
out=$(awk -f tests/gpu/net_trace.awk "$tmp.log")
ok=1
echo "$out" | grep -qx 'piece 0->1 socket 0 #1: queued 10.0 sent 110.0 landed 150.0' || ok=0
echo "$out" | grep -qx 'piece 0->1 socket 1 #1: queued 12.0 sent 132.0 landed 182.0' || ok=0
echo "$out" | grep -qx 'signal 0->1 value 4: posted 20.0 applied 190.0' || ok=0
echo "$out" | tail -n 1 | grep -qx 'medians (us): queued->sent 110.0 (2), sent->landed 45.0 (2), queued->landed 155.0 (2), signal posted->applied 170.0 (1), gap between landings 32.0 (1)' || ok=0
if [ "$ok" = 1 ]; then
    echo "testing net_trace/stages ... passed"
else
    echo "$out"
    echo "testing net_trace/stages ... failed"
fi
