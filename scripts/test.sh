#!/usr/bin/env bash
# The project's whole test run: CouchDB-Python's own suite against a real `lt serve`, then the
# Swift test suite (unit, property-based, HTTP integration and crash tests; it also replays the
# fuzzing corpus), the application API against its OpenAPI document (schemathesis), the
# dashboard's browser tests, and, with --fuzz SECONDS (CI gives 30), every libFuzzer harness
# for that long.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --for-tests
swift build --product lt
LT_BINARY="$(swift build --show-bin-path)/lt" scripts/couchdb-python-compat.sh
swift test --no-parallel
python3 Tests/Compatibility/openapi_conformance.py --lt "$(swift build --show-bin-path)/lt"
# The dashboard in headless Chromium; screenshots of each view in test-artifacts/dashboard.
python3 Tests/Browser/test_dashboard.py --lt "$(swift build --show-bin-path)/lt" --artifacts test-artifacts/dashboard
if [ "${1:-}" = "--fuzz" ]; then
  scripts/fuzz.sh "${2:-30}"
fi
