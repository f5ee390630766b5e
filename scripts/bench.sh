#!/usr/bin/env bash
# The side-by-side benchmarks on a release build, `lt-bench compare` (the database API) then
# `lt-bench scale` (the application: registration, device writes, consolidation): lt serve, and beside it
# any CouchDB-API server named by LT_BENCH_COUCHDB_URL (e.g. an Apache CouchDB 3.4.3 built
# beside the project, http://admin:PASSWORD@127.0.0.1:5984) and, for the geo figures, a PostGIS
# named by LT_BENCH_POSTGIS_URL (e.g. postgresql://postgres@127.0.0.1:5499/postgres, with Debian's
# postgresql-15-postgis-3; its psql and pgbench on the PATH); then PouchDB 9's initial sync in
# headless Chromium from each (scripts/bench-pouchdb.py), when LT_BENCH_POUCHDB_DIST names the
# dist/ directory of a PouchDB 9 release (it says "skipped" otherwise). Figures are printed and written
# as JSON to .build/bench/compare.json and .build/bench/scale.json (scale-single-db.json: the
# same with lt in single-database mode); speed never fails this
# script, a broken run does. A small `lt-bench population` run (1,000 users) checks the
# million-user tool; `lt-bench tls` what HTTPS costs (a shorter run with --quick).
#
#   scripts/bench.sh --quick    10,000 documents, 1,000 users: what CI runs, to record figures
#   scripts/bench.sh            100,000 documents, 10,000 users, as docs/benchmarks.md and
#                               docs/scaling.md report them (with CouchDB, the scale run also
#                               measures lt in cluster mode in front of it)
#   scripts/bench.sh --quick --debug
#                               the quick run on a debug build: what CI runs, to check that every
#                               harness still works without a third whole-package build (its figures
#                               are a debug build's and say so; never quote them)
#   scripts/bench.sh -- ARGS    more arguments for lt-bench compare (see lt-bench compare --help)
set -euo pipefail
cd "$(dirname "$0")/.."
args=(compare --json .build/bench/compare.json)
scale=(scale --json .build/bench/scale.json)
# The same workload with lt in single-database mode (lt alone: the original design beside it has
# a database per user in either case).
single=(scale --mode single-db --json .build/bench/scale-single-db.json)
tls=(tls)
configuration=release
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) args+=(--quick); scale+=(--quick); single+=(--quick); tls+=(--requests 2000 --handshakes 200 --rounds 1); shift ;;
        --debug) configuration=debug; shift ;;
        --) shift; args+=("$@"); break ;;
        *) echo "usage: scripts/bench.sh [--quick] [--debug] [-- lt-bench compare arguments]" >&2; exit 2 ;;
    esac
done
if [[ -n "${LT_BENCH_COUCHDB_URL:-}" ]]; then
    args+=(--couchdb "$LT_BENCH_COUCHDB_URL")
    scale+=(--couchdb "$LT_BENCH_COUCHDB_URL" --cluster)
else
    echo "bench: LT_BENCH_COUCHDB_URL is not set, so lt is measured alone (no CouchDB beside it)"
fi
if [[ -n "${LT_BENCH_POSTGIS_URL:-}" ]]; then
    args+=(--postgis "$LT_BENCH_POSTGIS_URL")
else
    echo "bench: LT_BENCH_POSTGIS_URL is not set, so the geo figures have no PostGIS beside them"
fi
if [[ "$configuration" = debug ]]; then
    echo "bench: a DEBUG build: this run checks the harnesses; its figures are not lt's speed"
fi
swift build -c "$configuration" --product lt
swift build -c "$configuration" --product lt-bench
mkdir -p .build/bench
bin="$(swift build -c "$configuration" --show-bin-path)"
"$bin/lt-bench" "${args[@]}"
"$bin/lt-bench" "${scale[@]}"
"$bin/lt-bench" "${single[@]}"
# The million-user tool at a small size (docs/scaling.md runs it with a million): it must keep working.
population=$(mktemp -d)
trap 'rm -rf "$population"' EXIT
"$bin/lt-bench" population --data "$population" --users 1000 --visitors 100 --watch 30
"$bin/lt-bench" "${tls[@]}"
pouch=(--lt "$bin/lt" --json .build/bench/pouchdb.json)
[[ -n "${LT_BENCH_COUCHDB_URL:-}" ]] && pouch+=(--couchdb "$LT_BENCH_COUCHDB_URL")
python3 scripts/bench-pouchdb.py "${pouch[@]}"
