#!/usr/bin/env bash
# Time one Tempo HTTP query N times after W warm-ups.
# Usage: tempo-bench.sh NAME PATH 'QUERY' START END [extra curl --data-urlencode args...]
# Env: BASE (default http://127.0.0.1:13200), N (20), W (2), OUT (/tmp/tempo-run/bench)
# Prints one line: name p50/p95/min/max ms, loadavg before/after; saves last body to $OUT/NAME.json
set -euo pipefail
NAME=$1; P=$2; Q=$3; S=$4; E=$5; shift 5
BASE=${BASE:-http://127.0.0.1:13200}; N=${N:-20}; W=${W:-2}; OUT=${OUT:-/tmp/tempo-run/bench}
mkdir -p "$OUT"
req() { curl -s -G -o "$OUT/$NAME.json" -w '%{time_total} %{http_code}\n' "$BASE$P" \
  --data-urlencode "q=$Q" --data-urlencode "start=$S" --data-urlencode "end=$E" "$@"; }
LA0=$(cut -d' ' -f1-3 /proc/loadavg); T0=$(date -u +%T)
for i in $(seq 1 "$W"); do req "$@" >> "$OUT/$NAME.warm"; done
: > "$OUT/$NAME.times"
for i in $(seq 1 "$N"); do req "$@" >> "$OUT/$NAME.times"; done
LA1=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$NAME" "$OUT/$NAME.times" "$LA0" "$LA1" "$T0" <<'PY'
import sys,statistics
name,f,la0,la1,t0=sys.argv[1:]
rows=[l.split() for l in open(f) if l.strip()]
codes=sorted(set(r[1] for r in rows))
ms=sorted(float(r[0])*1000 for r in rows)
def pct(p):
    k=(len(ms)-1)*p; lo=int(k); hi=min(lo+1,len(ms)-1); return ms[lo]+(ms[hi]-ms[lo])*(k-lo)
print(f"{name}: n={len(ms)} p50={pct(.5):.1f} p95={pct(.95):.1f} min={ms[0]:.1f} max={ms[-1]:.1f} ms  http={codes}  start={t0}Z load_before={la0} load_after={la1}")
PY
