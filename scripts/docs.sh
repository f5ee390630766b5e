#!/usr/bin/env bash
# TrackerKit's documentation: the DocC catalog (Sources/TrackerKit/TrackerKit.docc) and the doc
# comments of its public symbols, built with the toolchain's DocC into a static site
# (default .build/docs/TrackerKit; serve it with `python3 -m http.server -d .build/docs/TrackerKit`
# and open /documentation/trackerkit). Any warning fails it: a link to a symbol or an article
# that does not exist, a malformed topic. Prints how much of the public API has a doc comment.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.build/docs/TrackerKit}"
# The symbols of every module, as the debug build sees them (builds first if needed).
swift package dump-symbol-graph --minimum-access-level public >/dev/null
graphs="$(dirname "$(swift build --show-bin-path)")/symbolgraph"
only=$(mktemp -d)
trap 'rm -rf "$only"' EXIT
cp "$graphs"/TrackerKit.symbols.json "$only"/
cp "$graphs"/TrackerKit@*.symbols.json "$only"/ 2>/dev/null || true
rm -rf "$out"
mkdir -p "$(dirname "$out")"
docc convert Sources/TrackerKit/TrackerKit.docc \
  --additional-symbol-graph-dir "$only" \
  --fallback-display-name TrackerKit --fallback-bundle-identifier org.locationtracker.TrackerKit \
  --output-path "$out" --transform-for-static-hosting \
  --warnings-as-errors \
  --experimental-documentation-coverage --coverage-summary-level brief
echo "docs.sh: TrackerKit's documentation in $out"
