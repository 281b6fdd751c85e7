#!/usr/bin/env bash
# Side by side: Sluice and the rocketmq-rust 1.0 broker ("peer"), driven by
# the same independent client (peerdrv, rocketmq-client-rust 1.0.0) — the
# table in docs/benchmarks.md, "Issue 20: side by side with a peer".
#
# Usage: docs/peer-bench.sh PEER_ROOT PEERDRV SLUICE_NODE SLUICE [ROUNDS] [WORKLOADS]
#   (NULL_BROKER=path of `cargo build --release -p sluice-net --example null_broker`
#    adds the driver-bound ceiling: peerdrv against a broker that stores nothing,
#    and for s16 and b64x4 the page-cache ceiling: the same broker appending each
#    body to a file, `null_broker --append`; for f1 the SYNC_FLUSH ceiling: the same
#    broker writing each body and calling fdatasync before it answers,
#    `null_broker --sync`; for drain and push, the same broker
#    serving a backlog of 1 M messages from memory, `null_broker --backlog`)
#   PEER_ROOT  the `cargo install --root` of rocketmq-namesrv and rocketmq-broker 1.0.0
#              (bin/rocketmq-namesrv-rust, bin/rocketmq-broker-rust); build steps in
#              ../shared/peer-bench/README.md
#   PEERDRV    the built peerdrv binary
#   SLUICE_NODE, SLUICE  this repo's release binaries (sluice-node, sluice)
#   ROUNDS     interleaved rounds (default 3)
#   WORKLOADS  space-separated subset of: s1 s16 s64 b64x4 f1 f64 fb64x4 drain
# Env: PEER_CONF (default ../shared/peer-bench/conf beside the repo), OUT (default ./peer-bench.out),
#   FORCE=1 to run with the disk 65 % used or more, NO_TOUCH=1 to skip holding free page
#   reporting off and touching the free memory once before the first run (see below)
#
# Every run starts its broker on a fresh store, 1 KiB bodies, default
# configs. Systems per round, in this order: peer (its defaults), peer-best
# (commitLogMicroBatchEnabled = false), sluice (peerdrv), sluice-bench (the
# same workload from `sluice bench`), and with NULL_BROKER set, null (peerdrv
# against null_broker and a Sluice name server; for drain it serves a
# synthetic 1 M backlog from memory, `null_broker --backlog`).
# One line per run goes to stdout and $OUT: system workload round load1
# msgs_per_s p50_us p99_us broker_cpu_us_per_msg, then for peerdrv runs
# client_us= (peerdrv's CPU per message) and, for Sluice, warm_us= (the part
# of the broker's CPU its allocator thread spent warming pages ahead).
set -u
peer_root=$1 peerdrv=$2 node=$3 bench=$4 rounds=${5:-3}
workloads=${6:-"s1 s16 s64 b64x4 f1 f64 fb64x4 drain"}
here=$(cd "$(dirname "$0")" && pwd)
conf=${PEER_CONF:-$here/../../shared/peer-bench/conf}
out=${OUT:-peer-bench.out}
work=$(mktemp -d)
# The peer (like RocketMQ) reclaims and throttles once its disk is 75 %
# used (diskMaxUsedSpaceRatio), so a run near that measures its cleaner,
# not its writes (docs/benchmarks.md, 2026-12-06).
used=$(df --output=pcent "$work" | tail -1 | tr -dc 0-9)
echo "disk ${used}% used at $work" >&2
if [ "$used" -ge 65 ] && [ -z "${FORCE:-}" ]; then
  echo "refusing to run above 65% used (free space, or set FORCE=1)" >&2
  exit 1
fi
export ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback
tck=$(getconf CLK_TCK)
warm=3 dur=15

ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# CPU ticks of the broker's page-warming thread (Sluice's sluice-disk-alloc).
warm_ticks() {
  local t sum=0
  for t in /proc/"$1"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = sluice-disk-all ] && sum=$((sum + $(awk '{print $14 + $15}' "$t/stat")))
  done
  echo $sum
}

start_peer() { # $1 = best|default, $2 = async|sync
  rm -rf "$work/peer" && mkdir -p "$work/peer"
  sed "s#PEER_HOME#$work/peer#g" "$conf/namesrv.toml" >"$work/peer/namesrv.toml"
  sed "s#PEER_HOME#$work/peer#g" "$conf/broker.toml" >"$work/peer/broker.toml"
  [ "$1" = best ] && sed -i 's/^\[store\]$/[store]\ncommitLogMicroBatchEnabled = false/' "$work/peer/broker.toml"
  [ "$2" = sync ] && sed -i 's/^\[store\]$/[store]\nflushDiskType = "SYNC_FLUSH"/' "$work/peer/broker.toml"
  "$peer_root/bin/rocketmq-namesrv-rust" -c "$work/peer/namesrv.toml" --bindAddress 127.0.0.1 \
    --listenPort 9876 >"$work/namesrv.log" 2>&1 &
  ns_pid=$!
  sleep 1
  "$peer_root/bin/rocketmq-broker-rust" -c "$work/peer/broker.toml" -n 127.0.0.1:9876 \
    >"$work/broker.log" 2>&1 &
  broker_pid=$!
  sleep 5
}

start_null() { # $1 = nothing, or --append FILE, --sync FILE, --backlog N
  "$node" namesrv --listen 127.0.0.1:9876 >"$work/namesrv.log" 2>&1 &
  ns_pid=$!
  sleep 1
  rm -f "$work/sink"
  "$NULL_BROKER" --namesrv 127.0.0.1:9876 --listen 127.0.0.1:10911 "$@" >"$work/broker.log" 2>&1 &
  broker_pid=$!
  sleep 2
}

start_sluice() { # $1 = async|sync
  rm -rf "$work/sluice"
  "$node" standalone --data-dir "$work/sluice" --flush "$1" --metrics-listen off \
    --namesrv-listen 127.0.0.1:9876 --broker-listen 127.0.0.1:10911 >"$work/broker.log" 2>&1 &
  broker_pid=$! ns_pid=
  sleep 3
}

stop_all() {
  kill "$broker_pid" $ns_pid 2>/dev/null
  wait "$broker_pid" $ns_pid 2>/dev/null
  # Each store goes with its broker: GBs left behind fill the disk for
  # the next system's run.
  rm -rf "$work/sink" "$work/sluice" "$work/peer"
  sleep 1
}

# peerdrv produce with the workload's flags; prints "msgs p50 p99 cpu_us
# client_us=… warm_us=…".
drive() { # $1 = concurrency, $2 = batch
  local t0 t1 c0 c1 w0 w1 line acked
  "$peerdrv" produce --topic BenchTopic --concurrency "$1" --batch "$2" --warmup-s $warm \
    --duration-s $dur --size 1024 >"$work/drv.out" 2>"$work/drv.err" &
  local drv=$!
  sleep $warm; t0=$(ticks "$broker_pid") c0=$(ticks $drv) w0=$(warm_ticks "$broker_pid")
  # peerdrv exits as its window ends: sample it a second before, and
  # count its CPU against the messages of that part of the window.
  sleep $((dur - 1)); c1=$(ticks $drv)
  wait $drv; t1=$(ticks "$broker_pid") w1=$(warm_ticks "$broker_pid")
  line=$(grep RESULT "$work/drv.out" | tail -1)
  acked=$(sed -n 's/.* acked=\([0-9]*\).*/\1/p' <<<"$line")
  echo "$(sed -n 's/.*msgs_per_s=\([0-9.]*\).*/\1/p' <<<"$line")" \
    "$(sed -n 's/.* p50=\([0-9]*\).*/\1/p' <<<"$line")" \
    "$(sed -n 's/.* p99=\([0-9]*\).*/\1/p' <<<"$line")" \
    "$(per_msg $((t1 - t0)) "$acked")" "client_us=$(per_msg $((c1 - c0)) $((${acked:-0} * (dur - 1) / dur)))" \
    "warm_us=$(per_msg $((w1 - w0)) "$acked")"
}

per_msg() { # $1 = ticks, $2 = messages; prints µs per message
  awk -v d="$1" -v a="${2:-0}" -v k="$tck" 'BEGIN{ if (a > 0) printf "%.1f", d * 1e6 / k / a; else print "-" }'
}

# The same workload from `sluice bench`; prints "msgs p50 p99 cpu_us".
drive_sluice_bench() { # $1 = producers, $2 = batch
  local mode=sync extra=()
  [ "$2" -gt 1 ] && mode=batch extra=(--batch "$2")
  "$bench" bench produce --namesrv 127.0.0.1:9876 --topic BenchTopic --size 1024 --mode $mode \
    "${extra[@]}" --producers "$1" --warmup $warm --duration $dur --broker-pid "$broker_pid" \
    --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
lat, cost = r["send_latency_us"], r["cost"]
print(round(r["sent"]["msgs_per_s"]), round(lat["p50"]), round(lat["p99"]),
      cost.get("broker_cpu_us_per_msg", "-"), "client_cpu_us=%s" % cost.get("client_cpu_us_per_msg", "-"))' \
    2>/dev/null || echo "- - - -"
}

# From peerdrv push's per-second lines: msgs/s from the first message to
# 99 % of $1, and how many messages the client failed to admit to its
# consume pool (rocketmq-client-rust 1.0 logs "consume_message task
# panicked ... runtime.capacity.exhausted" and sends them back for retry).
push_detail() { # $1 = backlog, $2 = push output
  sed 's/\x1b\[[0-9;]*m//g' "$2" | awk -v n="$1" '
    /consumed\/s=/ { split($0, a, "t="); t = a[2] + 0; split($0, b, "total="); c = b[2] + 0
                     if (!f && c > 0) f = t - 0.5; if (!p && c >= 0.99 * n) p = t }
    /consume_message task panicked/ { r++ }
    END { if (p > f) printf "to99=%.0f rejected=%d", 0.99 * n / (p - f), r; else printf "to99=- rejected=%d", r }'
}

# Each step is cut off after 5 minutes: the peer's fill once hung for 90
# (a cut-off step reports what it printed, or "-").
# With $1 = null the broker already holds the backlog (null_broker --backlog):
# no fill.
drain_and_push() { # prints: drain msgs/s, push msgs/s (first to last), backlog, push detail
  local n=1000000
  if [ "${1:-}" != null ]; then
    timeout 300 "$peerdrv" produce --topic DrainTopic --concurrency 4 --batch 64 --total 1000000 \
      --size 1024 >"$work/fill.out" 2>&1
    n=$(sed -n 's/.* acked=\([0-9]*\).*/\1/p' "$work/fill.out" | tail -1)
  fi
  timeout 300 "$peerdrv" drain --topic DrainTopic --expect "${n:-1000000}" --pull-batch 32 --idle-s 15 \
    >"$work/drain.out" 2>&1
  timeout 300 "$peerdrv" push --topic DrainTopic --expect "${n:-1000000}" --idle-s 20 >"$work/push.out" 2>&1
  echo "$(sed -n 's/.*msgs_per_s=\([0-9.]*\).*/\1/p' "$work/drain.out" | tail -1)" \
    "$(sed -n 's/.*msgs_per_s=\([0-9.]*\).*/\1/p' "$work/push.out" | tail -1)" "${n:-0}" \
    "$(push_detail "${n:-1000000}" "$work/push.out")"
}

report() { # system workload round result...
  local line
  line="$1 $2 $3 $(cut -d' ' -f1 /proc/loadavg) ${*:4}"
  echo "$line" | tee -a "$out"
}

# A VM's memory costs several times more the first time the guest touches
# a page after the host took it back (a host-side fault behind each one).
# This VM reports free pages to its host (virtio-balloon free page
# reporting) as soon as they are free, so each run's page cache, freed when
# its store is deleted, went back to the host, and the next run's writes
# paid the faults again — a per-byte cost of the benchmark's churn, not of
# either broker, that moved one build's b64x4 by 25 %. Where the kernel
# lets root hold reporting off (this VM's page_reporting parameters), hold
# it off while the script runs, and touch most of the free memory once
# before the first run (docs/benchmarks.md, 2026-12-06, tenth session).
# Holding freed pages back for 5 minutes (min_free_ms, the largest value
# it accepts) was not enough on this kernel later the same day: 9 GB went
# back within 20 s of the touch, and rounds 2 and 3 of a whole table ran
# ~20 minutes after it. A page_reporting_order above the largest buddy
# order (10 here) leaves no free block large enough to report, so the
# reporting passes stop (fourteenth session). The old values come back on
# exit, and the end of the run prints how much was reported meanwhile.
# NO_TOUCH=1 skips all of this.
reporting=/sys/module/page_reporting/parameters
reported_kib() { cat "$reporting/reported_kib" 2>/dev/null || echo 0; }
saved_reporting=()
restore_reporting() {
  local kv
  for kv in "${saved_reporting[@]}"; do echo "${kv#*=}" >"$reporting/${kv%%=*}"; done
  echo "free page reporting restored (${saved_reporting[*]}); reported while held:" \
    "$(($(reported_kib) - reported_at_start)) KiB" >&2
}
reported_at_start=$(reported_kib)
if [ -z "${NO_TOUCH:-}" ] && [ -d "$reporting" ]; then
  for kv in min_free_ms=300000 max_waiting_mib=65536 page_reporting_order=11; do
    param=${kv%%=*}
    [ -w "$reporting/$param" ] || continue
    saved_reporting+=("$param=$(cat "$reporting/$param")")
    echo "${kv#*=}" >"$reporting/$param" || echo "could not set $param" >&2
  done
  if [ ${#saved_reporting[@]} -gt 0 ]; then
    trap restore_reporting EXIT
    echo "free page reporting held off (was ${saved_reporting[*]})" >&2
  fi
fi
if [ -z "${NO_TOUCH:-}" ]; then
  avail_mb=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
  touch_mb=$((avail_mb * 85 / 100))
  echo "touching ${touch_mb} MiB of memory once" >&2
  dd if=/dev/zero of=/dev/null bs="${touch_mb}M" count=1 iflag=fullblock status=none ||
    echo "memory touch failed; runs on a fresh VM are biased against the first" >&2
fi

for round in $(seq 1 "$rounds"); do
  for w in $workloads; do
    flush=async conc=1 batch=1
    case $w in
      s1) ;; s16) conc=16 ;; s64) conc=64 ;; b64x4) conc=4 batch=64 ;;
      f1) flush=sync ;; f64) flush=sync conc=64 ;; fb64x4) flush=sync conc=4 batch=64 ;;
      drain) ;;
      *) echo "unknown workload $w" >&2; exit 2 ;;
    esac
    systems="peer peer-best sluice sluice-bench"
    case $w in s1 | s16 | s64 | b64x4 | drain) [ -n "${NULL_BROKER:-}" ] && systems="$systems null" ;; esac
    case $w in s16 | b64x4) [ -n "${NULL_BROKER:-}" ] && systems="$systems null-append" ;; esac
    [ "$w" = f1 ] && [ -n "${NULL_BROKER:-}" ] && systems="$systems null-sync"
    for system in $systems; do
      case $system in
        peer) start_peer default $flush ;;
        peer-best) start_peer best $flush ;;
        null) if [ "$w" = drain ]; then start_null --backlog 1000000; else start_null; fi ;;
        null-append) start_null --append "$work/sink" ;;
        null-sync) start_null --sync "$work/sink" ;;
        *) start_sluice $flush ;;
      esac
      if [ "$w" = drain ]; then
        [ "$system" = sluice-bench ] && { stop_all; continue; }
        read -r d p n detail < <(drain_and_push "$system")
        report "$system" drain "$round" "$d" - - - "backlog=$n"
        report "$system" push "$round" "$p" - - - "backlog=$n $detail"
      elif [ "$system" = sluice-bench ]; then
        report "$system" "$w" "$round" $(drive_sluice_bench $conc $batch)
      else
        report "$system" "$w" "$round" $(drive $conc $batch)
      fi
      stop_all
    done
  done
done
rm -rf "$work"
