#!/usr/bin/env bash
# Regenerates internal/llm/prices.json in place from the pinned
# @pydantic/genai-prices (package-lock.json here). To move to a newer
# version: change the version in package.json and in main.go (pkgVersion,
# pkgPublished: `npm view @pydantic/genai-prices@VERSION time`), run
# `npm install --package-lock-only` here, then this script, and review the diff.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v npm >/dev/null || { echo "gen.sh: npm (Node.js >= 20) is needed to install @pydantic/genai-prices" >&2; exit 1; }
(cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
cd "$root"
go run ./scripts/genprices -pkg "$here/node_modules/@pydantic/genai-prices" -o internal/llm/prices.json
