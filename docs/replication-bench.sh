#!/bin/bash
# Throughput cost of replication and failover time (release build):
#   lone broker | master + replica with ASYNC replication | with SYNC replication
# each loaded by `sluice bench produce`, then a SYNC group whose master is
# killed with -9 while a producer sends: the time to the first acknowledged
# send on the new master. Everything on this machine's loopback.
#   cargo build --release -p sluice-node -p sluice-client
set -u
B=${SLUICE_BIN:-target/release}
W=/tmp/repl-bench
NS=127.0.0.1:39876
CTL=127.0.0.1:39878
DUR=${DUR:-10}
LOAD=${LOAD:---size 1024 --producers 4 --mode sync}
rm -rf $W; mkdir -p $W
wait_line() { # file pattern
  for _ in $(seq 1 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "timeout waiting for $2 in $1"; cat "$1"; exit 1
}
$B/sluice-node namesrv --listen $NS --controller-id 1 --controller-peers "1=$CTL" \
  --controller-data-dir $W/ctl --broker-timeout-ms 3000 > $W/ns.log 2>&1 &
NSPID=$!
wait_line $W/ns.log "name server listening"
broker() { # id mode(none|async|sync) port
  local repl=""
  if [ "$2" != none ]; then
    repl="[replication]
mode = \"$2\"
controller_addrs = [\"$CTL\"]
controller_heartbeat_ms = 300"
  fi
  cat > $W/b$1.toml <<EOT
broker_name = "bench-$2"
broker_id = $1
listen = "127.0.0.1:$3"
listen_vip = false
namesrv_addrs = ["$NS"]
data_dir = "$W/data-$2-$1"
$repl
EOT
  $B/sluice-node broker --config $W/b$1.toml > $W/b$1-$2.log 2>&1 &
  echo $!
}
run() { # mode
  local p1 p2=""
  # A lone broker is id 0 (the master); a group's brokers are 1 and 2.
  if [ "$1" = none ]; then p1=$(broker 0 $1 41011); wait_line $W/b0-$1.log "broker listening"
  else p1=$(broker 1 $1 41011); wait_line $W/b1-$1.log "broker listening"; fi
  if [ "$1" != none ]; then sleep 1; p2=$(broker 2 $1 41021); wait_line $W/b2-$1.log "broker listening"; fi
  sleep 3
  $B/sluice --namesrv $NS bench produce --topic Bench-$1 $LOAD --warmup 2 --duration $DUR --json > $W/$1.json 2>$W/$1.err
  python3 - "$1" "$W/$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
s, l = d["sent"], d["send_latency_us"]
print(f"{sys.argv[1]:>6}: {s['msgs_per_s']:>9.0f} msg/s  errors {s['errors']}  "
      f"latency p50 {l['p50']:.0f} us  p99 {l['p99']:.0f} us  p999 {l['p999']:.0f} us  "
      f"client cpu {d['cost']['client_cpu_us_per_msg']} us/msg")
PY
  kill -TERM $p1 $p2 2>/dev/null; wait $p1 $p2 2>/dev/null
}
run none
run async
run sync
# Failover time: the process test measures it with real processes.
echo "failover: cargo test -p sluice-client --test failover_process -- --nocapture | grep 'failover time'"
kill -TERM $NSPID; wait $NSPID 2>/dev/null
