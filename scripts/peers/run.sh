#!/usr/bin/env bash
# The peers benchmark: Rastro, Jaeger v2 (Badger storage) and Tempo (single
# binary, local storage) side by side on one corpus. It starts each store on
# loopback ports with a fresh data directory under $RASTRO_PEERS_CACHE/run,
# runs the query client (scripts/peers/query), which loads the corpus into
# each and times the same queries against each, then stops every process it
# started. Results go to docs/benchmarks/peers.md (between the markers) and
# docs/benchmarks/raw/peers-*.json.
#
#   scripts/peers/run.sh --build            # build Jaeger and Tempo first (minutes, ~2.5 GB), then run
#   scripts/peers/run.sh --spans 1000000    # default 1,000,000
#   scripts/peers/run.sh --only rastro,jaeger --note "other engineers were running go test"
#
# Every other flag is passed to the query client (go run ./scripts/peers/query --help).
set -euo pipefail
cd "$(dirname "$0")/../.."

CACHE=${RASTRO_PEERS_CACHE:-$HOME/.cache/rastro-peers}
JAEGER_VERSION=${JAEGER_VERSION:-v1.76.0}
build=0
only=rastro,jaeger,tempo
pass=()
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=1 ;;
	--only)
		only=$2
		shift
		;;
	*) pass+=("$1") ;;
	esac
	shift
done
want() { [[ ",$only," == *",$1,"* ]]; }

if [ $build = 1 ]; then
	targets=()
	want jaeger && targets+=(jaeger)
	want tempo && targets+=(tempo)
	[ ${#targets[@]} -gt 0 ] && scripts/peers/build.sh "${targets[@]}"
fi
JAEGER_BIN=$CACHE/bin/jaeger-$JAEGER_VERSION
TEMPO_BIN=$CACHE/bin/tempo
for s in jaeger tempo; do
	bin=JAEGER_BIN
	[ $s = tempo ] && bin=TEMPO_BIN
	if want $s && [ ! -x "${!bin}" ]; then
		echo "run.sh: ${!bin} is missing: run with --build (or --only without $s)" >&2
		exit 2
	fi
done

RUN=$CACHE/run
rm -rf "$RUN"
mkdir -p "$RUN"
go build -o "$RUN/rastro" ./cmd/rastro

# Ports: fixed, unusual, checked free (the query client needs them known).
P_RASTRO=24400 P_RASTRO_GRPC=24401
P_JAEGER_QUERY=24410 P_JAEGER_QUERY_GRPC=24411 P_JAEGER_OTLP=24412 P_JAEGER_HEALTH=24413
P_TEMPO_HTTP=24420 P_TEMPO_GRPC=24421 P_TEMPO_OTLP=24422 P_TEMPO_MEMBERLIST=24423
for p in $P_RASTRO $P_RASTRO_GRPC $P_JAEGER_QUERY $P_JAEGER_QUERY_GRPC $P_JAEGER_OTLP $P_JAEGER_HEALTH $P_TEMPO_HTTP $P_TEMPO_GRPC $P_TEMPO_OTLP $P_TEMPO_MEMBERLIST; do
	if (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then
		echo "run.sh: port $p is in use" >&2
		exit 2
	fi
done

pids=()
# cleanup stops what this script started: SIGTERM, up to 30 s to exit (Tempo
# takes minutes to shut down gracefully), then SIGKILL.
cleanup() {
	[ ${#pids[@]} -gt 0 ] || return 0
	kill "${pids[@]}" 2>/dev/null || true
	for _ in $(seq 1 30); do
		alive=0
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null && alive=1
		done
		[ $alive = 1 ] || break
		sleep 1
	done
	kill -KILL "${pids[@]}" 2>/dev/null || true
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

# wait_http URL NAME PID: until URL answers 200, or the process dies.
wait_http() {
	for _ in $(seq 1 300); do
		if curl -fsS -o /dev/null "$1" 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$3" 2>/dev/null; then
			echo "run.sh: $2 exited; its log:" >&2
			tail -30 "$RUN/$2.log" >&2
			exit 1
		fi
		sleep 1
	done
	echo "run.sh: $2 not ready after 300 s ($1)" >&2
	exit 1
}

args=()
if want rastro; then
	"$RUN/rastro" serve --data-dir "$RUN/rastro-data" --http-addr 127.0.0.1:$P_RASTRO --grpc-addr 127.0.0.1:$P_RASTRO_GRPC \
		--durability wal >"$RUN/rastro.log" 2>&1 &
	pids+=($!)
	wait_http http://127.0.0.1:$P_RASTRO/readyz rastro $!
	args+=(--rastro http://127.0.0.1:$P_RASTRO)
fi

if want jaeger; then
	mkdir -p "$RUN/jaeger-data"
	cat >"$RUN/jaeger.yaml" <<EOF
# Written from cmd/jaeger/config-badger.yaml of jaeger $JAEGER_VERSION: one
# Badger store, the OTLP/HTTP receiver, the query extension, on loopback.
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$P_JAEGER_HEALTH
  jaeger_query:
    storage:
      traces: badger_store
    http:
      endpoint: 127.0.0.1:$P_JAEGER_QUERY
    grpc:
      endpoint: 127.0.0.1:$P_JAEGER_QUERY_GRPC
  jaeger_storage:
    backends:
      badger_store:
        badger:
          directories:
            keys: $RUN/jaeger-data/keys
            values: $RUN/jaeger-data/values
          ephemeral: false
          ttl:
            spans: 48h
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$P_JAEGER_OTLP
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: badger_store
EOF
	"$JAEGER_BIN" --config "$RUN/jaeger.yaml" >"$RUN/jaeger.log" 2>&1 &
	pids+=($!)
	wait_http http://127.0.0.1:$P_JAEGER_QUERY/api/services jaeger $!
	args+=(--jaeger http://127.0.0.1:$P_JAEGER_QUERY --jaeger-otlp http://127.0.0.1:$P_JAEGER_OTLP)
fi

if want tempo; then
	mkdir -p "$RUN/tempo-data"
	cat >"$RUN/tempo.yaml" <<EOF
# Single binary (target all), local storage, OTLP/HTTP receiver, on
# loopback; from example/docker-compose/single-binary/tempo.yaml and
# integration/util/config-single-binary.yaml of grafana/tempo, without the
# metrics generator. Changed from the defaults, each for a reason:
# - the live store's ingestion_time_range_slack (2 m) clamps a trace's start
#   to its ingestion time minus the slack, which would place a corpus of
#   past timestamps at "now" and outside every search window: 48 h;
# - the block list is polled every 10 s (5 m), so that data older than
#   query_backend_after (15 m, which Tempo searches in backend blocks only)
#   becomes searchable a minute after the live store completes its block;
# - the ingestion rate and burst limits and live traces per tenant are
#   raised so that a 1M-span corpus sent at full speed is not refused.
target: all
stream_over_http_enabled: false
server:
  http_listen_address: 127.0.0.1
  http_listen_port: $P_TEMPO_HTTP
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: $P_TEMPO_GRPC
  log_level: warn
memberlist:
  bind_addr: [127.0.0.1]
  bind_port: $P_TEMPO_MEMBERLIST
querier:
  frontend_worker:
    frontend_address: 127.0.0.1:$P_TEMPO_GRPC
backend_worker:
  backend_scheduler_addr: 127.0.0.1:$P_TEMPO_GRPC
ingest: null
block_builder: null
distributor:
  receivers:
    otlp:
      protocols:
        http:
          endpoint: 127.0.0.1:$P_TEMPO_OTLP
live_store:
  shutdown_marker_dir: $RUN/tempo-data/live-store/shutdown-marker
  wal:
    path: $RUN/tempo-data/live-store/wal
    ingestion_time_range_slack: 48h
storage:
  trace:
    backend: local
    wal:
      path: $RUN/tempo-data/wal
    local:
      path: $RUN/tempo-data/blocks
    blocklist_poll: 10s
overrides:
  defaults:
    ingestion:
      rate_limit_bytes: 1000000000
      burst_size_bytes: 1000000000
      max_traces_per_user: 10000000
usage_report:
  reporting_enabled: false
EOF
	"$TEMPO_BIN" -config.file "$RUN/tempo.yaml" >"$RUN/tempo.log" 2>&1 &
	pids+=($!)
	wait_http http://127.0.0.1:$P_TEMPO_HTTP/ready tempo $!
	args+=(--tempo http://127.0.0.1:$P_TEMPO_HTTP --tempo-otlp http://127.0.0.1:$P_TEMPO_OTLP)
fi

echo "run.sh: stores up; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go run ./scripts/peers/query --load "${args[@]}" "${pass[@]}"
