#!/usr/bin/env bash
# Installs what lt needs beyond Swift, where it is missing: duktape-dev (the JavaScript engine
# for design documents; without it lt builds, and JavaScript requests answer with a clear
# error), libsqlite3-dev, libicu-dev (CouchDB's collation of keys), libjemalloc-dev (the allocator; optional, faster), libxml2 (GPX
# files) and libjs-leaflet with libjs-leaflet.markercluster (the dashboard's map). With --for-tests, also CouchDB-Python 1.2 (for its test suite), schemathesis (the
# OpenAPI conformance run), Chromium and a DevTools client (the dashboard's browser tests),
# openssl and curl (the TLS tests and the README's tour).
set -euo pipefail
cd "$(dirname "$0")/.."

# apt_install WHY PACKAGE...: installs the packages with apt-get (as root, or through sudo);
# without apt-get, says what to install and why.
apt_install() {
  local why="$1"
  shift
  if command -v apt-get >/dev/null 2>&1; then
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "installing $*" >&2
    $sudo apt-get update -qq && $sudo apt-get install -y -qq "$@" >/dev/null
  else
    echo "install $* (Debian/Ubuntu names) $why" >&2
    return 1
  fi
}

# Package.swift looks for these headers, and SwiftPM caches what the manifest said (keyed by
# its text): after installing any, drop that cache and mark the manifest changed so an
# earlier build looks again.
headers_changed=0
if [ ! -f /usr/include/duktape.h ] || [ ! -f /usr/include/sqlite3.h ]; then
  apt_install "for the full build" duktape-dev libsqlite3-dev && headers_changed=1
fi
# zlib inflates the ZIP archives history imports read (Google Takeout downloads).
if [ ! -f /usr/include/zlib.h ]; then
  apt_install "for ZIP archives" zlib1g-dev
fi
# ICU's collator orders view keys and Mango values as CouchDB does (the same Debian libicu
# CouchDB links); the build needs its headers.
if [ ! -f /usr/include/unicode/ucol.h ]; then
  apt_install "for CouchDB's collation (ICU)" libicu-dev
fi
# jemalloc: when its headers are present at build time, `lt` links it as its allocator (see
# Package.swift): less CPU and memory with thousands of databases opened and closed.
if [ ! -f /usr/include/jemalloc/jemalloc.h ]; then
  apt_install "for the faster allocator" libjemalloc-dev && headers_changed=1
fi
if [ "$headers_changed" = 1 ]; then
  rm -f "${HOME:-/root}/.cache/org.swift.swiftpm/manifests/manifest.db" .build/manifest.db
  touch Package.swift
fi
# GPX files are read with Foundation's XMLParser, which needs libxml2 at run time.
if ! ldconfig -p 2>/dev/null | grep -q "libxml2.so.2"; then
  apt_install "for GPX files" libxml2 || true
fi
# CouchDB clients from PyPI (CouchDB-Python's own suite, and Tests/Compatibility/clients.py).
if [ "${1:-}" = "--for-tests" ]; then
  python3 -m pip install --quiet --disable-pip-version-check -r Tests/Compatibility/requirements.txt
fi
# The application API checked against its OpenAPI document (Tests/Compatibility).
if [ "${1:-}" = "--for-tests" ] && [ "$(schemathesis --version 2>/dev/null)" != "schemathesis, version 4.32.5" ]; then
  python3 -m pip install --quiet schemathesis==4.32.5
fi
# The TLS tests make their certificates with openssl and fetch with curl at test time; the README's tour runs curl.
if [ "${1:-}" = "--for-tests" ] && { ! command -v openssl >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; }; then
  apt_install "for the TLS tests" openssl curl
fi
# The dashboard's map: Leaflet and its marker clusters from Debian, served by lt itself (no CDN).
if [ ! -f /usr/share/javascript/leaflet/leaflet.js ] || [ ! -f /usr/share/javascript/leaflet/leaflet.markercluster.js ]; then
  apt_install "for the dashboard's map" libjs-leaflet libjs-leaflet.markercluster || true
fi
# The dashboard's browser tests: Debian's headless Chromium and a DevTools-protocol client.
if [ "${1:-}" = "--for-tests" ]; then
  if ! command -v chromium >/dev/null 2>&1; then
    apt_install "for the dashboard's browser tests" chromium || true
  fi
  if ! python3 -c "import websocket" 2>/dev/null; then
    python3 -m pip install --quiet websocket-client
  fi
  # axe-core (the accessibility scan of the browser tests), as PyPI's axe-playwright-python ships it.
  if ! python3 -c "import axe_playwright_python" 2>/dev/null; then
    python3 -m pip install --quiet --no-deps axe-playwright-python==0.1.8
  fi
fi
