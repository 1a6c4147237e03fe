#!/usr/bin/env bash
# Fails if internal/llm/prices.json is not exactly what scripts/genprices
# generates from the pinned @pydantic/genai-prices (package-lock.json here):
# installs the package with npm ci into this directory, generates the table
# to a temporary file and compares. Regenerate with gen.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v npm >/dev/null || { echo "check.sh: npm (Node.js >= 20) is needed to install @pydantic/genai-prices" >&2; exit 1; }
(cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
cd "$root"
go run ./scripts/genprices -pkg "$here/node_modules/@pydantic/genai-prices" -o "$tmp"
if ! cmp -s "$tmp" internal/llm/prices.json; then
	{
		echo "check.sh: FAIL: internal/llm/prices.json differs from what scripts/genprices generates from the pinned @pydantic/genai-prices:"
		diff -u internal/llm/prices.json "$tmp" | head -n 40 || true
		echo "check.sh: the table is generated, not edited by hand: run bash scripts/genprices/gen.sh and commit internal/llm/prices.json (put local price changes in a --prices file instead)."
	} >&2
	exit 1
fi
echo "check.sh: ok: internal/llm/prices.json is up to date with the pinned @pydantic/genai-prices"
