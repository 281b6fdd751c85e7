#!/usr/bin/env bash
# Paired broker binaries under SYNC_FLUSH, one bench client, interleaved runs,
# a fresh store per start (docs/benchmarks.md, "one sync-flush sender without hops").
# Usage: docs/flush-pair-bench.sh BASE_SLUICE_NODE HEAD_SLUICE_NODE SLUICE [ROUNDS]
# Prints one JSON line per run: which, workload (f1, f64, fb64x4), round, load, report.
set -u
base=$1 head=$2 bench=$3 rounds=${4:-3}
data=$(mktemp -d -p .)
for round in $(seq 1 "$rounds"); do
  for which in base head; do
    node=$base; [ "$which" = head ] && node=$head
    for wl in f1 f64 fb64x4; do
      rm -rf "$data"; mkdir -p "$data"
      "$node" standalone --data-dir "$data" --flush sync \
        --namesrv-listen 127.0.0.1:19876 --broker-listen 127.0.0.1:20911 >/dev/null 2>&1 &
      pid=$!
      sleep 3
      case $wl in
        f1) extra=(--mode sync --producers 1);;
        f64) extra=(--mode sync --producers 64);;
        fb64x4) extra=(--mode batch --batch 64 --producers 4);;
      esac
      load=$(cut -d' ' -f1 /proc/loadavg)
      json=$("$bench" bench produce --namesrv 127.0.0.1:19876 --topic B1 --size 1024 \
        "${extra[@]}" --warmup 2 --duration 8 --broker-pid "$pid" --json 2>/dev/null)
      echo "{\"which\":\"$which\",\"wl\":\"$wl\",\"round\":$round,\"load\":$load,\"r\":${json:-null}}"
      kill "$pid"; wait "$pid" 2>/dev/null
    done
  done
done
rm -rf "$data"
