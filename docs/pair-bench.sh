#!/usr/bin/env bash
# Paired broker binaries, one bench client, interleaved runs, a fresh store
# per start (docs/benchmarks.md, "send CPU before and after").
# Usage: docs/pair-bench.sh BASE_SLUICE_NODE HEAD_SLUICE_NODE SLUICE [ROUNDS]
# Prints one JSON line per run: which, mode, round, load average, report.
set -u
base=$1 head=$2 bench=$3 rounds=${4:-3}
data=$(mktemp -d)
for round in $(seq 1 "$rounds"); do
  for which in base head; do
    node=$base; [ "$which" = head ] && node=$head
    for mode in sync batch; do
      rm -rf "$data"; mkdir -p "$data"
      "$node" standalone --data-dir "$data" --flush async \
        --namesrv-listen 127.0.0.1:19876 --broker-listen 127.0.0.1:20911 >/dev/null 2>&1 &
      pid=$!
      sleep 3
      extra=(); [ "$mode" = batch ] && extra=(--batch 64)
      load=$(cut -d' ' -f1 /proc/loadavg)
      json=$("$bench" bench produce --namesrv 127.0.0.1:19876 --topic B1 --size 1024 \
        --mode "$mode" "${extra[@]}" --warmup 2 --duration 10 --broker-pid "$pid" --json 2>/dev/null)
      echo "{\"which\":\"$which\",\"mode\":\"$mode\",\"round\":$round,\"load\":$load,\"r\":${json:-null}}"
      kill "$pid"; wait "$pid" 2>/dev/null
    done
  done
done
rm -rf "$data"
