#!/bin/bash
# Side by side: remoting vs gRPC on one release standalone node.
set -u
BIN=/work/main/target/release
D=/tmp/gb/data; rm -rf $D
$BIN/sluice-node standalone --data-dir $D --namesrv-listen 127.0.0.1:49876 --broker-listen 127.0.0.1:50911 --metrics-listen off --grpc-listen 127.0.0.1:48081 > /tmp/gb/node.log 2>&1 &
NODE=$!
sleep 3
NS="--namesrv 127.0.0.1:49876"
G="--protocol grpc --grpc-endpoint 127.0.0.1:48081"
b() { echo "== $* (load $(cut -d' ' -f1 /proc/loadavg))"; $BIN/sluice $NS --json bench "$@" --broker-pid $NODE | python3 -c '
import json,sys; v=json.load(sys.stdin)
s=v.get("sent") or {}; r=v.get("received") or {}; c=v.get("cost") or {}; l=v.get("send_latency_us") or {}
print("  sent msg/s %.0f  recv msg/s %.0f  p50 %s p99 %s  broker us/msg %s  bench us/msg %s" % (s.get("msgs_per_s",0), r.get("msgs_per_s",0), l.get("p50"), l.get("p99"), c.get("broker_cpu_us_per_msg"), c.get("bench_cpu_us_per_msg")))'; }
for round in 1 2 3; do
  b produce --topic R$round --producers 16 --duration 8 --warmup 2
  b produce --topic G$round --producers 16 --duration 8 --warmup 2 $G
done
for round in 1 2 3; do
  b produce --topic RB$round --producers 4 --mode batch --batch 64 --duration 5 --warmup 1
  b produce --topic GB$round --producers 4 --mode batch --batch 64 --duration 5 --warmup 1 $G
done
for round in 1 2 3; do
  b consume --topic RB$round --consumers 4 --kind pull --duration 30 --idle-exit 1
  b consume --topic GB$round --consumers 4 --pull-batch 32 --duration 30 --idle-exit 1 $G
done
kill $NODE; wait $NODE 2>/dev/null
