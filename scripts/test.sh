#!/usr/bin/env bash
# The project's whole test run: CouchDB-Python's own suite against a real `lt serve`, then the
# Swift test suite (unit, property-based, HTTP integration and crash tests; it also replays the
# fuzzing corpus and the exchanges recorded from CouchDB 3.4.3's replicator), real CouchDB
# clients from PyPI against lt (Tests/Compatibility/clients.py), the application API against
# its OpenAPI document (schemathesis), the README's tour run as written (twice), the browser
# tests, TrackerKit's documentation built with DocC, and, with --fuzz SECONDS (CI gives 30),
# every libFuzzer harness for that long. First, the sources' layout: `swift format` with the
# repository's .swift-format (lines of 120 characters; `swift format format --in-place --recursive Sources` mends).
set -euo pipefail
cd "$(dirname "$0")/.."
# step NAME: prints how long the run has taken before NAME starts.
step() { echo "test.sh: ${SECONDS}s, $1" >&2; }
scripts/install-deps.sh --for-tests
step "the sources' layout (swift format lint)"
swift format lint --strict --recursive --configuration .swift-format Sources
step "building lt"
swift build --product lt
step "CouchDB-Python's suite"
LT_BINARY="$(swift build --show-bin-path)/lt" scripts/couchdb-python-compat.sh
step "swift test"
swift test --no-parallel
step "TrackerKit's documentation"
# The SDK's DocC catalog and doc comments built with the toolchain's DocC; a warning (a broken
# symbol link) fails the run. (Its guide's example is run by TrackerKitGuideTests.)
scripts/docs.sh
step "clients, OpenAPI, README tour, browsers"
# Real CouchDB clients from PyPI (ibmcloudant, aiocouch, pycouchdb, CouchDB-Python) against lt.
python3 Tests/Compatibility/clients.py --lt "$(swift build --show-bin-path)/lt"
python3 Tests/Compatibility/openapi_conformance.py --lt "$(swift build --show-bin-path)/lt"
# The README's tour (its blocks marked <!-- tour -->) run as written, twice, on a fresh server.
python3 Tests/Readme/test_readme_tour.py --lt "$(swift build --show-bin-path)/lt"
# The dashboard in headless Chromium; screenshots of each view in test-artifacts/dashboard.
python3 Tests/Browser/test_dashboard.py --lt "$(swift build --show-bin-path)/lt" --artifacts test-artifacts/dashboard
# The installable tracker app (/app/) on an emulated phone (Playwright on Debian's Chromium), with a
# private database per user and with one shared database; screenshots in test-artifacts/app*.
python3 Tests/Browser/test_app.py --lt "$(swift build --show-bin-path)/lt" --artifacts test-artifacts/app
python3 Tests/Browser/test_app.py --lt "$(swift build --show-bin-path)/lt" --mode single-db --artifacts test-artifacts/app-single-db
# PouchDB 9 in headless Chromium against lt, when LT_TEST_POUCHDB_DIST names a PouchDB release's
# dist/ (PouchDB is not in the registries CI reaches; without it the test says it is skipped).
python3 Tests/Browser/test_pouchdb.py --lt "$(swift build --show-bin-path)/lt"
if [ "${1:-}" = "--fuzz" ]; then
  step "fuzzing"
  scripts/fuzz.sh "${2:-30}"
fi
step "done"
