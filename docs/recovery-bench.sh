#!/bin/bash
# Start-up and recovery time per GB of CommitLog (release build): fills a
# standalone node for FILL seconds, then times a clean restart, a restart
# after kill -9, and full scans without a checkpoint (warm, caches dropped).
set -u
B=${SLUICE_BIN:-target/release}   # built by: cargo build --release -p sluice-node -p sluice-client
D=/tmp/rec-data
NS=127.0.0.1:39876
BR=127.0.0.1:40911
rm -rf $D
start() { # $1 label
  : > /tmp/rec.log
  s=$(date +%s.%N)
  $B/sluice-node standalone --data-dir $D --namesrv-listen $NS --broker-listen $BR >> /tmp/rec.log 2>&1 &
  PID=$!
  while ! grep -q "sluice broker listening" /tmp/rec.log; do sleep 0.01; if ! kill -0 $PID 2>/dev/null; then echo "node died"; cat /tmp/rec.log; exit 1; fi; done
  e=$(date +%s.%N)
  gb=$(du -sb $D/store/commitlog 2>/dev/null | cut -f1)
  echo "$1: $(echo "$e - $s" | bc) s to listen; commitlog files $(echo "scale=2; $gb/1073741824" | bc) GiB"
}
start "fresh"
$B/sluice --namesrv $NS bench produce --topic Rec --size 1024 --batch 64 --window 4 --duration ${FILL:-20} --json > /tmp/rec-fill.json 2>/dev/null
python3 -c "import json;d=json.load(open('/tmp/rec-fill.json'));print('filled', {k:d[k] for k in d if k in ('sent','acked','stored','msgs_per_s','messages')})" 2>/dev/null || head -c 400 /tmp/rec-fill.json
ls -la $D/store/commitlog | tail -3
kill -TERM $PID; wait $PID
start "clean restart"
kill -9 $PID; wait $PID 2>/dev/null
start "restart after kill -9"
kill -TERM $PID; wait $PID
rm -f $D/store/checkpoint
start "restart without checkpoint (full scan, page cache warm)"
kill -TERM $PID; wait $PID
rm -f $D/store/checkpoint
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && start "restart without checkpoint (full scan, caches dropped)" || echo "cannot drop caches"
kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null
grep -i "recover\|scan" /tmp/rec.log | tail -5
