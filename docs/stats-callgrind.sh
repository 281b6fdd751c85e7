#!/usr/bin/env bash
# What recording stats costs the broker per message, in instructions
# (docs/benchmarks.md, "Cost of stats"): the node runs under callgrind,
# whose instruction counts do not depend on what else the machine does;
# counters are zeroed once the broker serves, the bench sends for
# DURATION seconds, and the broker's instructions are dumped right after.
# Set-ups: `stats = false` and stats on (the default), sync and batch 64.
# Usage: docs/stats-callgrind.sh SLUICE_NODE SLUICE [DURATION]
# Prints one line per run: setup, mode, messages sent, instructions, per message.
set -u
node=$1 bench=$2 duration=${3:-15}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
small='commit_log_segment_bytes = 16777216
index_slots = 4096
index_entries = 16384'
printf '%s\nstats = false\n' "$small" > "$work/off.toml"
printf '%s\n' "$small" > "$work/on.toml"
for mode in ${MODES:-sync batch}; do
  for setup in off on; do
    data="$work/data"; rm -rf "$data"; mkdir -p "$data"
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
      "$node" standalone --config "$work/$setup.toml" --data-dir "$data" --flush async \
      --namesrv-listen 127.0.0.1:19876 --broker-listen 127.0.0.1:20911 \
      --metrics-listen off > "$work/node.log" 2>&1 &
    pid=$!
    until grep -q "sluice broker listening" "$work/node.log" 2>/dev/null; do sleep 1; done
    extra=(); [ "$mode" = batch ] && extra=(--batch 64)
    # One short run creates the topic and warms the paths, then zero.
    "$bench" bench produce --namesrv 127.0.0.1:19876 --topic B1 --size 1024 \
      --mode "$mode" "${extra[@]}" --warmup 0 --duration 2 --json >/dev/null 2>&1
    callgrind_control --zero "$pid" >/dev/null 2>&1
    json=$("$bench" bench produce --namesrv 127.0.0.1:19876 --topic B1 --size 1024 \
      --mode "$mode" "${extra[@]}" --warmup 0 --duration "$duration" --json 2>/dev/null)
    callgrind_control --dump=measured "$pid" >/dev/null 2>&1; sleep 1
    kill "$pid"; wait "$pid" 2>/dev/null
    sent=$(printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sent"]["msgs"])')
    ir=$(cat "$work"/cg.out* | awk '/^desc: Trigger: .*measured/{m=1} m && /^summary:/{print $2; exit}')
    python3 -c "print('$setup', '$mode', $sent, $ir, round($ir / $sent))"
    rm -f "$work"/cg.out*
  done
done
