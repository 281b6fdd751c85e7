#!/usr/bin/env bash
# What recording stats costs a send (docs/benchmarks.md, "Cost of stats"):
# one broker binary, one bench client, three set-ups interleaved round by
# round — `stats = false` (nothing recorded on the hot path), stats on
# (the default), and stats on with /metrics scraped every second while
# the load runs — sync and batch 64, a fresh store per start.
# Usage: [SETUPS="off on"] [MODES=batch] docs/stats-bench.sh SLUICE_NODE SLUICE [ROUNDS]
# Prints one JSON line per run: setup, mode, round, load average, report.
set -u
node=$1 bench=$2 rounds=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'stats = false\n' > "$work/off.toml"
: > "$work/on.toml"
: > "$work/scraped.toml"
data="$work/data"
for round in $(seq 1 "$rounds"); do
  for setup in ${SETUPS:-off on scraped}; do
    for mode in ${MODES:-sync batch}; do
      rm -rf "$data"; mkdir -p "$data"
      "$node" standalone --config "$work/$setup.toml" --data-dir "$data" --flush async \
        --namesrv-listen 127.0.0.1:19876 --broker-listen 127.0.0.1:20911 \
        --metrics-listen 127.0.0.1:15557 >/dev/null 2>&1 &
      pid=$!
      sleep 3
      scraper=
      if [ "$setup" = scraped ]; then
        (while :; do curl -s -o /dev/null 127.0.0.1:15557/metrics; sleep 1; done) &
        scraper=$!
      fi
      extra=(); [ "$mode" = batch ] && extra=(--batch 64)
      load=$(cut -d' ' -f1 /proc/loadavg)
      json=$("$bench" bench produce --namesrv 127.0.0.1:19876 --topic B1 \
        --size 1024 --mode "$mode" "${extra[@]}" --warmup 2 --duration 10 \
        --broker-pid "$pid" --json 2>/dev/null)
      echo "{\"setup\":\"$setup\",\"mode\":\"$mode\",\"round\":$round,\"load\":$load,\"r\":${json:-null}}"
      [ -n "$scraper" ] && kill "$scraper" 2>/dev/null
      kill "$pid"; wait "$pid" 2>/dev/null
    done
  done
done
