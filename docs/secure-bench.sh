#!/usr/bin/env bash
# What ACL and TLS cost a send (docs/benchmarks.md, "ACL and TLS"): one
# broker binary, one bench client, three set-ups — plain, ACL (every request
# signed and verified), ACL + TLS — interleaved round by round, sync and
# batch 64, a fresh store per start. Certificates are made here, for this
# run only.
# Usage: [SETUPS="plain acl"] [MODES=batch] docs/secure-bench.sh SLUICE_NODE SLUICE [ROUNDS]
# Prints one JSON line per run: setup, mode, round, load average, report.
set -u
node=$1 bench=$2 rounds=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench-ca -keyout "$work/ca-key.pem" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$work/key.pem" -out "$work/req.pem" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$work/ext.cnf"
openssl x509 -req -in "$work/req.pem" -CA "$work/ca.pem" -CAkey "$work/ca-key.pem" \
  -CAcreateserial -days 2 -extfile "$work/ext.cnf" -out "$work/cert.pem" 2>/dev/null
acl='[acl]
mode = "enforcing"
access_key = "broker-a"
secret_key = "broker-a-secret"
[[acl.accounts]]
access_key = "broker-a"
secret_key = "broker-a-secret"
broker = true
[[acl.accounts]]
access_key = "bench"
secret_key = "bench-secret"
admin = true
default_topic_perm = "PUB|SUB"
default_group_perm = "PUB|SUB"'
tls="[tls]
mode = \"enforcing\"
cert = \"$work/cert.pem\"
key = \"$work/key.pem\"
ca = \"$work/ca.pem\""
: > "$work/plain.toml"
printf '%s\n' "$acl" > "$work/acl.toml"
printf '%s\n%s\n' "$acl" "$tls" > "$work/acl-tls.toml"
data="$work/data"
for round in $(seq 1 "$rounds"); do
  for setup in ${SETUPS:-plain acl acl-tls}; do
    for mode in ${MODES:-sync batch}; do
      rm -rf "$data"; mkdir -p "$data"
      "$node" standalone --config "$work/$setup.toml" --data-dir "$data" --flush async \
        --namesrv-listen 127.0.0.1:19876 --broker-listen 127.0.0.1:20911 >/dev/null 2>&1 &
      pid=$!
      sleep 3
      extra=(); [ "$mode" = batch ] && extra=(--batch 64)
      creds=(); [ "$setup" != plain ] && creds=(--access-key bench --secret-key bench-secret)
      [ "$setup" = acl-tls ] && creds+=(--tls-ca "$work/ca.pem")
      load=$(cut -d' ' -f1 /proc/loadavg)
      json=$("$bench" "${creds[@]}" bench produce --namesrv 127.0.0.1:19876 --topic B1 \
        --size 1024 --mode "$mode" "${extra[@]}" --warmup 2 --duration 10 \
        --broker-pid "$pid" --json 2>/dev/null)
      echo "{\"setup\":\"$setup\",\"mode\":\"$mode\",\"round\":$round,\"load\":$load,\"r\":${json:-null}}"
      kill "$pid"; wait "$pid" 2>/dev/null
    done
  done
done
