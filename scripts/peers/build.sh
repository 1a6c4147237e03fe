#!/usr/bin/env bash
# Builds the peer stores the `peers` benchmark compares Rastro with, from
# source, into a cache outside the repository (nothing here is committed):
#
#   Jaeger v2 (module github.com/jaegertracing/jaeger, version $JAEGER_VERSION)
#     from the Go module cache: `go mod download`, copied writable, `go build ./cmd/jaeger`.
#   Tempo (github.com/grafana/tempo at $TEMPO_REF, default the mirror's HEAD)
#     from a bare git mirror: $TEMPO_GIT_DIR (a `git clone --bare` of grafana/tempo),
#     exported with `git archive`, `go build ./cmd/tempo`.
#
# Each build takes minutes and about 2.5 GB of module cache; a binary already
# built is kept unless --force. Usage: scripts/peers/build.sh [--force] [jaeger] [tempo]
set -euo pipefail

CACHE=${RASTRO_PEERS_CACHE:-$HOME/.cache/rastro-peers}
JAEGER_VERSION=${JAEGER_VERSION:-v1.76.0}
TEMPO_GIT_DIR=${TEMPO_GIT_DIR:-/work/.mirror/grafana+tempo/repo}
TEMPO_REF=${TEMPO_REF:-HEAD}

force=0
what=()
for a in "$@"; do
	case "$a" in
	--force) force=1 ;;
	jaeger | tempo) what+=("$a") ;;
	*)
		echo "build.sh: unknown argument $a (want --force, jaeger, tempo)" >&2
		exit 2
		;;
	esac
done
[ ${#what[@]} -gt 0 ] || what=(jaeger tempo)
mkdir -p "$CACHE/bin"

build_jaeger() {
	local bin="$CACHE/bin/jaeger-$JAEGER_VERSION"
	if [ -x "$bin" ] && [ $force = 0 ]; then
		echo "jaeger: $bin exists (--force rebuilds)"
		return
	fi
	local dir
	dir=$(go mod download -json "github.com/jaegertracing/jaeger@$JAEGER_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		echo "jaeger: go mod download gave no module directory" >&2
		exit 1
	fi
	rm -rf "$CACHE/src/jaeger"
	mkdir -p "$CACHE/src"
	cp -r "$dir" "$CACHE/src/jaeger"
	chmod -R u+w "$CACHE/src/jaeger"
	echo "jaeger: building $JAEGER_VERSION in $CACHE/src/jaeger"
	(cd "$CACHE/src/jaeger" && GOFLAGS=-mod=mod go build -o "$bin" ./cmd/jaeger)
	cp "$CACHE/src/jaeger/cmd/jaeger/config-badger.yaml" "$CACHE/jaeger-config-badger.example.yaml"
	echo "jaeger: built $bin"
}

build_tempo() {
	local rev
	rev=$(git --git-dir="$TEMPO_GIT_DIR" rev-parse --short=12 "$TEMPO_REF")
	local bin="$CACHE/bin/tempo-$rev"
	if [ -x "$bin" ] && [ $force = 0 ]; then
		echo "tempo: $bin exists (--force rebuilds)"
		ln -sf "$bin" "$CACHE/bin/tempo"
		return
	fi
	rm -rf "$CACHE/src/tempo"
	mkdir -p "$CACHE/src/tempo"
	git --git-dir="$TEMPO_GIT_DIR" archive "$rev" | tar -x -C "$CACHE/src/tempo"
	echo "tempo: building $rev ($(git --git-dir="$TEMPO_GIT_DIR" describe --tags "$rev" 2>/dev/null || echo untagged)) in $CACHE/src/tempo"
	(cd "$CACHE/src/tempo" && go build -o "$bin" ./cmd/tempo)
	ln -sf "$bin" "$CACHE/bin/tempo"
	echo "tempo: built $bin"
}

for w in "${what[@]}"; do
	"build_$w"
done
