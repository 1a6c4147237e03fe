#!/usr/bin/env bash
# Start a single-binary Tempo for peer measurements (see tempo-run config).
# Usage: scripts/peers/tempo-start.sh [config]   -> prints the pid; log in /tmp/tempo-run/tempo.log
set -euo pipefail
CFG=${1:-/tmp/tempo-run/tempo.yaml}
BIN=${TEMPO_BIN:-/tmp/tempo-bin/tempo}
mkdir -p /tmp/tempo-run/data
nohup "$BIN" -config.file="$CFG" >>/tmp/tempo-run/tempo.log 2>&1 &
echo $! > /tmp/tempo-run/tempo.pid
echo $!
# wait for readiness
for i in $(seq 1 120); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:13200/ready)" = 200 ]; then
    echo "ready after ${i}s" >&2; exit 0
  fi
  sleep 1
done
echo "not ready after 120s" >&2; exit 1
