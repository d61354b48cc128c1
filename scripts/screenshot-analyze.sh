#!/usr/bin/env bash
# screenshot-analyze.sh renders the page of "vram analyze --html" in headless
# Chromium and saves a PNG, to look at what the page draws (CI checks only
# the page's structure).
#
#   scripts/screenshot-analyze.sh [SNAPSHOT [OUT.png]]
#
# SNAPSHOT defaults to analyze/testdata/sim_train.json, OUT.png to
# /tmp/vram-analyze.png; the page is written beside it as OUT.html. Chromium
# comes from Debian's packages and is installed when missing (as root). The
# browser runs with a throw-away profile and without network features: the
# page must not need any.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SNAP=${1:-$ROOT/analyze/testdata/sim_train.json}
PNG=${2:-/tmp/vram-analyze.png}
HTML=${PNG%.png}.html
WIDTH=${WIDTH:-1400}
HEIGHT=${HEIGHT:-1000}

if ! command -v chromium >/dev/null 2>&1; then
	echo "installing Debian's chromium" >&2
	apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

cd "$ROOT"
CGO_ENABLED=0 go run ./cmd/vram analyze --html "$HTML" "$SNAP" >/dev/null

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
	--disable-component-update --disable-sync --no-first-run --hide-scrollbars \
	--user-data-dir="$profile" --window-size="$WIDTH,$HEIGHT" \
	--screenshot="$PNG" "file://$HTML" 2>/dev/null
echo "$PNG (page: $HTML)"
