#!/usr/bin/env bash
# Starts `lt serve` on port 5984 (some CouchDB-Python tests hard-code localhost:5984) with a
# fresh data directory, runs CouchDB-Python 1.2's own test suite against it, and stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${LT_BINARY:-$(swift build --show-bin-path)/lt}"
[ -x "$bin" ] || swift build --product lt
data=$(mktemp -d)
log="$data/serve.log"
"$bin" serve --data "$data/db" --db-port 5984 --port 0 --admin admin:secret --log-level warning >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
  grep -q "database API listening" "$log" && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "lt serve did not start"; exit 1; }
  sleep 0.1
done
COUCHDB_URL=http://admin:secret@localhost:5984/ python3 scripts/couchdb_python_compat.py
