#!/usr/bin/env bash
# The project's whole test run: CouchDB-Python's own suite against a real `lt serve`, then the
# Swift test suite (unit, property-based, HTTP integration and crash tests), then the dashboard's
# browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --for-tests
swift build --product lt
LT_BINARY="$(swift build --show-bin-path)/lt" scripts/couchdb-python-compat.sh
swift test --no-parallel
# The dashboard in headless Chromium; screenshots of each view in test-artifacts/dashboard.
python3 Tests/Browser/test_dashboard.py --lt "$(swift build --show-bin-path)/lt" --artifacts test-artifacts/dashboard
