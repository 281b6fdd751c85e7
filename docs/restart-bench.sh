#!/bin/bash
# Restart time, two builds alternated on one store (issue 20's restart rows):
# fills a fresh store with NEW for FILL seconds (1 KiB records, batches of 64,
# 4 in flight), pauses 3 s and kills it with -9; then, ROUNDS times each, for
# OLD and NEW in turn: a start after kill -9, a clean restart, and a start
# with the checkpoint deleted after a clean shutdown (full scan). Prints, per
# start, the time to the broker's listening line, the process's CPU time
# then, when the store had opened and how long the dedupe window took (from
# the node's log). Every record is inside the 10-minute window if the whole
# run takes less than that.
# Then (LOADED rounds, default ROUNDS; 0 skips it) the start after a kill -9
# under sustained load: a fresh store, sends running (64 x 4 batches), the
# broker killed 12.5 s after it listened, then the timed start.
#   OLD=dir NEW=dir [FILL=14] [ROUNDS=3] [FIRST=2] [LOADED=3] bash docs/restart-bench.sh
# (dir: a directory holding sluice-node and sluice, release builds)
set -u
OLD=${OLD:?build dir}; NEW=${NEW:?build dir}
D=/tmp/restart-bench-data; NS=127.0.0.1:39876; BR=127.0.0.1:40911; LOG=/tmp/restart-bench.log
ts() { # first log line matching $1, as epoch seconds
  sed 's/\x1b\[[0-9;]*m//g' $LOG | grep -m1 -E "$1" | cut -c1-27 |
    python3 -c "import sys,datetime;t=sys.stdin.read().strip();print(datetime.datetime.strptime(t,'%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=datetime.timezone.utc).timestamp() if t else 0)"
}
launch() { # $1 build dir; sets P, waits for listening
  : > $LOG
  $1/sluice-node standalone --data-dir $D --namesrv-listen $NS --broker-listen $BR >> $LOG 2>&1 &
  P=$!
  # One tail reading the log as it grows (a grep and a sleep forked every
  # 10 ms took a tenth of a core from the start being timed).
  while IFS= read -r -t 120 line; do
    [[ $line == *"sluice broker listening"* ]] && break
  done < <(tail -F -n +1 $LOG 2>/dev/null)
  kill -0 $P 2>/dev/null || { echo "node died"; cat $LOG; exit 1; }
}
start() { # $1 build dir, $2 label, $3 kill|term (how it stops after)
  sync; sleep 1
  local s e cpu o w
  s=$(date +%s.%N)
  launch $1
  e=$(date +%s.%N)
  cpu=$(awk '{printf "%.2f", ($14+$15)/100}' /proc/$P/stat)
  o=$(ts "store opened"); w=$(ts "dedupe window (rebuilt|read)")
  printf "%-24s listen %.2f s  cpu %s s  store open at %.2f s  window %.2f s  %s\n" "$2" \
    "$(echo "$e - $s" | bc)" "$cpu" "$(echo "$o - $s" | bc)" "$(echo "$w - $o" | bc)" \
    "$(sed 's/\x1b\[[0-9;]*m//g' $LOG | grep -m1 -oE '(dedupe window rebuilt|replayed=[0-9]+)')"
  if [ "$3" = kill ]; then kill -9 $P; wait $P 2>/dev/null; else kill -TERM $P; wait $P; fi
}
pkill -x sluice-node; rm -rf $D
launch $NEW
$NEW/sluice --namesrv $NS bench produce --topic Rec --size 1024 --batch 64 --window 4 \
  --duration ${FILL:-14} --json > /tmp/restart-bench-fill.json 2>/dev/null
sleep 3; kill -9 $P; wait $P 2>/dev/null
python3 -c "import json;d=json.load(open('/tmp/restart-bench-fill.json'));print('filled', d['sent'])"
for r in $(seq 1 ${ROUNDS:-3}); do
  start $NEW "new kill9" kill; start $OLD "old kill9" kill
done
for r in $(seq 1 ${ROUNDS:-3}); do
  start $NEW "new clean" term; start $OLD "old clean" term
done
for r in $(seq 1 ${ROUNDS:-3}); do
  rm -f $D/store/checkpoint; start $NEW "new no checkpoint" term
  rm -f $D/store/checkpoint; start $OLD "old no checkpoint" term
done
sed 's/\x1b\[[0-9;]*m//g' $LOG | grep -m1 -oE 'store opened end=[0-9]+'
# Last, the first start after a kill -9 that follows writes (queues and key
# index dirty since their last sync, the active segment's rest never
# written): per round and build, a fresh store filled for FIRST seconds
# (default 2), a 3 s pause, kill -9, then the timed start.
for r in $(seq 1 ${ROUNDS:-3}); do
  for b in new old; do
    dir=$NEW; [ $b = old ] && dir=$OLD
    rm -rf $D; launch $dir
    $dir/sluice --namesrv $NS bench produce --topic Rec --size 1024 --batch 64 --window 4 \
      --duration ${FIRST:-2} --json > /dev/null 2>&1
    sleep 3; kill -9 $P; wait $P 2>/dev/null
    start $dir "$b first after kill9" term
  done
done
for r in $(seq 1 ${LOADED:-${ROUNDS:-3}}); do
  for b in new old; do
    dir=$NEW; [ $b = old ] && dir=$OLD
    rm -rf $D; launch $dir
    $dir/sluice --namesrv $NS bench produce --topic Rec --size 1024 --batch 64 --window 4 \
      --duration 30 --json > /tmp/restart-bench-loaded.json 2>/dev/null &
    B=$!
    sleep 12.5; kill -9 $P; wait $P 2>/dev/null
    kill $B 2>/dev/null; wait $B 2>/dev/null
    start $dir "$b kill9 under load" term
  done
done
