#!/usr/bin/env bash
# The side-by-side benchmark (`lt-bench compare`) on a release build: lt serve, and beside it
# any CouchDB-API server named by LT_BENCH_COUCHDB_URL (e.g. an Apache CouchDB 3.4.3 built
# beside the project, http://admin:PASSWORD@127.0.0.1:5984) and, for the geo figures, a PostGIS
# named by LT_BENCH_POSTGIS_URL (e.g. postgresql://postgres@127.0.0.1:5499/postgres, with Debian's
# postgresql-15-postgis-3; its psql and pgbench on the PATH). Figures are printed and written
# as JSON to .build/bench/compare.json; speed never fails this script, a broken run does.
#
#   scripts/bench.sh --quick    10,000 documents: what CI runs, to record figures
#   scripts/bench.sh            100,000 documents, as docs/benchmarks.md reports them
#   scripts/bench.sh -- ARGS    more arguments for lt-bench compare (see lt-bench compare --help)
set -euo pipefail
cd "$(dirname "$0")/.."
args=(compare --json .build/bench/compare.json)
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) args+=(--quick); shift ;;
        --) shift; args+=("$@"); break ;;
        *) echo "usage: scripts/bench.sh [--quick] [-- lt-bench compare arguments]" >&2; exit 2 ;;
    esac
done
if [[ -n "${LT_BENCH_COUCHDB_URL:-}" ]]; then
    args+=(--couchdb "$LT_BENCH_COUCHDB_URL")
else
    echo "bench: LT_BENCH_COUCHDB_URL is not set, so lt is measured alone (no CouchDB beside it)"
fi
if [[ -n "${LT_BENCH_POSTGIS_URL:-}" ]]; then
    args+=(--postgis "$LT_BENCH_POSTGIS_URL")
else
    echo "bench: LT_BENCH_POSTGIS_URL is not set, so the geo figures have no PostGIS beside them"
fi
swift build -c release --product lt
swift build -c release --product lt-bench
mkdir -p .build/bench
"$(swift build -c release --show-bin-path)/lt-bench" "${args[@]}"
