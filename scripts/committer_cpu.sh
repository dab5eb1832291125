#!/bin/bash
# Usage: committer_cpu.sh BINARY MODE [W] [N]
# Starts BINARY on a fresh data dir and runs peerbench MODE at W workers over N
# items; prints peerbench's result and the committer thread's CPU
# (utime+stime, /proc) over the drain only: sampled once the daemon has
# counted N pushed items (the preload's end) and again at the end.
BIN=$1; MODE=$2; W=${3:-64}; N=${4:-30000}
D=$(mktemp -d /tmp/hq-cc.XXXX)
$BIN serve --listen 127.0.0.1:17171 --metrics-listen 127.0.0.1:19471 --resp-listen "" --data-dir $D/data >$D/log 2>&1 &
P=$!
for i in $(seq 100); do curl -s 127.0.0.1:17171/healthz >/dev/null && break; sleep 0.1; done
T=$(for t in /proc/$P/task/*; do [ "$(cat $t/comm)" = hotq-committer ] && echo ${t##*/}; done)
ticks() { awk '{print $14+$15}' /proc/$P/task/$T/stat; }
HZ=$(getconf CLK_TCK)
(
  while true; do
    pushed=$(curl -s 127.0.0.1:19471/metrics | awk '/^hotq_pushed_items_total/ {s+=$2} END {print s+0}')
    if [ "${pushed%.*}" -ge "$N" ]; then ticks > $D/drain_start; break; fi
    sleep 0.05
  done
) &
S=$!
${PEERBENCH:-peerbench} --http-base http://127.0.0.1:17171 --http-pid $P --target $MODE -w $W -n $N 2>&1 | grep -v "^#" | tail -2
B=$(ticks); A=$(cat $D/drain_start 2>/dev/null || echo 0); kill $S 2>/dev/null
echo "committer thread over the drain: $((B-A)) ticks = $(( (B-A) * 1000000 / HZ / N )) us per item ($MODE W=$W N=$N)"
kill $P; wait $P 2>/dev/null; rm -rf $D
