#!/bin/bash
# Absent-value latency over 1M canonical spans (docs/benchmarks/canonical.md,
# "Absent values (issue 23)"): ingest with rastro load --seed 1, stop the
# server gracefully (the write buffer is sealed), restart it, then time 5 runs
# of 200 absent user.id searches (different values per run), 3 runs of
# present ones, and 3 runs of Tempo tag searches for absent numbers
# ($NUMBERS queries each, 100 by default; a binary without number hints takes
# about a second a query).
# usage: [NUMBERS=n] scripts/absent/run.sh RASTRO_BINARY LABEL PORT
set -e
bin=$1; label=$2; port=$3
dir=$(mktemp -d /tmp/rastro-absent-$label.XXXXXX)
timer=$(mktemp /tmp/rastro-absent-timer.XXXXXX)
(cd "$(dirname "$0")" && go build -o "$timer" .)
url=http://127.0.0.1:$port
up() { for _ in $(seq 100); do curl -sf $url/api/v1/status >/dev/null 2>&1 && return; sleep 0.2; done; }
$bin serve --data-dir "$dir" --http-addr 127.0.0.1:$port --grpc-addr "" >"$dir.log" 2>&1 &
pid=$!
up
$bin load --seed 1 --spans 1000000 --endpoint $url --progress 0 | tail -3
kill -TERM $pid; wait $pid || true
$bin serve --data-dir "$dir" --http-addr 127.0.0.1:$port --grpc-addr "" >>"$dir.log" 2>&1 &
pid=$!
up
curl -s $url/api/v1/stats; echo
for run in 1 2 3 4 5; do
  echo "run $run, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$timer" -url $url -seed $run
done
for run in 1 2 3; do
  echo "present run $run, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$timer" -url $url -seed $run -present
done
for run in 1 2 3; do
  echo "numbers run $run, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$timer" -url $url -seed $run -n "${NUMBERS:-100}" -tempo-numbers
done
kill -TERM $pid; wait $pid || true
rm -rf "$dir" "$dir.log" "$timer"
