#!/usr/bin/env bash
# The project's test command (README: "Run the tests"). CI runs exactly this.
# go vet everywhere; the race detector on the packages that run goroutines;
# every other package's tests plainly. Timings are never asserted here: the
# benchmark harness (rastro bench) measures.
set -euo pipefail
cd "$(dirname "$0")/.."

race_pkgs=(./internal/wal/... ./internal/segment/... ./internal/engine/... ./internal/server/... ./internal/process/... ./internal/store/... ./internal/chstore/... ./internal/logstore/... ./internal/metricstore/... ./internal/spanmetrics/...)

# The MCP tests drive the server with third-party clients from npm (the
# TypeScript SDK and the Inspector CLI, pinned in the lock file); Node.js 20+.
if [ ! -d internal/mcpserver/testdata/node/node_modules ]; then
	echo "== npm ci (MCP test clients)"
	(cd internal/mcpserver/testdata/node && npm ci --no-audit --no-fund)
fi

echo "== go vet"
go vet ./...

echo "== go test -race (concurrent packages)"
go test -race -count=1 -timeout 20m "${race_pkgs[@]}"

echo "== go test (everything else)"
mapfile -t rest < <(go list ./... | grep -v -e /internal/wal -e /internal/segment -e /internal/engine -e /internal/server -e /internal/process -e /internal/store -e /internal/chstore -e /internal/logstore -e /internal/metricstore -e /internal/spanmetrics)
go test -count=1 -timeout 20m "${rest[@]}"

# The fuzz targets of the parsers that read bytes from the network: their
# seed corpora (testdata/fuzz/) already ran as plain tests above; here each
# also fuzzes for a fixed short time. A failure leaves the input under the
# package's testdata/fuzz/ to commit with the fix.
fuzztime=3s
fuzz_targets=(
	"./internal/query FuzzParseTraceQL" "./internal/query FuzzParseQuery"
	"./internal/query FuzzFromValues" "./internal/query FuzzParseTime" "./internal/query FuzzParseDuration"
	"./internal/query FuzzParseLogFilter"
	"./internal/server FuzzQueryRoutes" "./internal/server FuzzTagsQuery" "./internal/server FuzzDecodeCursor"
	"./internal/server FuzzParseAuthFile" "./internal/chstore FuzzCheckSQL"
	"./internal/otlp FuzzDecodeProto" "./internal/otlp FuzzDecodeJSON" "./internal/otlp FuzzDecodeNative"
	"./internal/otlp FuzzDecodeZipkinJSON" "./internal/otlp FuzzDecodeZipkinProto"
	"./internal/otlp FuzzDecodeLogsProto" "./internal/otlp FuzzDecodeLogsJSON" "./internal/otlp FuzzDecodeNativeLogs"
	"./internal/otlp FuzzDecodeMetricsProto" "./internal/otlp FuzzDecodeMetricsJSON" "./internal/promql FuzzParse"
)
echo "== go test -fuzz (network parsers, ${fuzztime} each)"
# A target that fails with nothing but "context deadline exceeded" and wrote no
# failing input hit the race in Go's fuzzing coordinator at the -fuzztime
# boundary (go.dev/issue/75804, fixed in Go 1.27; go1.26 has it): it is run
# once more. Any other failure, or a written input, fails at once.
fuzz_log=$(mktemp)
trap 'rm -f "$fuzz_log"' EXIT
for t in "${fuzz_targets[@]}"; do
	read -r pkg name <<<"$t"
	for attempt in 1 2; do
		if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$fuzz_log"; then
			break
		fi
		if [ "$attempt" = 2 ] || grep -q -e 'Failing input written' -e 'panic:' -e '_test.go:[0-9]' "$fuzz_log" ||
			! grep -q '^    context deadline exceeded$' "$fuzz_log"; then
			exit 1
		fi
		echo "== $name: the fuzz coordinator's deadline race (go.dev/issue/75804), no input written: running it again"
	done
done
