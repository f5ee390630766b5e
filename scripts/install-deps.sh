#!/usr/bin/env bash
# Installs what lt needs beyond Swift, where it is missing: duktape-dev (the JavaScript engine
# for design documents; without it lt builds, and JavaScript requests answer with a clear
# error), libsqlite3-dev and libxml2 (GPX files). With --for-tests, also CouchDB-Python 1.2 (for its
# test suite).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f /usr/include/duktape.h ] || [ ! -f /usr/include/sqlite3.h ]; then
  if command -v apt-get >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "installing duktape-dev and libsqlite3-dev" >&2
    $sudo apt-get update -qq && $sudo apt-get install -y -qq duktape-dev libsqlite3-dev >/dev/null
    # Package.swift looks for duktape.h, and SwiftPM caches what the manifest said (keyed by
    # its text): drop that cache and mark the manifest changed so an earlier build looks again.
    rm -f "${HOME:-/root}/.cache/org.swift.swiftpm/manifests/manifest.db" .build/manifest.db
    touch Package.swift
  else
    echo "install duktape-dev and libsqlite3-dev (Debian/Ubuntu) for the full build" >&2
  fi
fi
# GPX files are read with Foundation's XMLParser, which needs libxml2 at run time.
if ! ldconfig -p 2>/dev/null | grep -q "libxml2.so.2" && command -v apt-get >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing libxml2" >&2
  $sudo apt-get update -qq && $sudo apt-get install -y -qq libxml2 >/dev/null
fi
if [ "${1:-}" = "--for-tests" ] && ! python3 -c "import couchdb" 2>/dev/null; then
  python3 -m pip install --quiet couchdb==1.2
fi
# The dashboard's browser tests: Debian's headless Chromium, the Leaflet packages the
# dashboard serves when present, and a DevTools-protocol client.
if [ "${1:-}" = "--for-tests" ]; then
  if ! command -v chromium >/dev/null 2>&1 || [ ! -f /usr/share/javascript/leaflet/leaflet.markercluster.js ]; then
    if command -v apt-get >/dev/null 2>&1; then
      sudo=""
      [ "$(id -u)" = 0 ] || sudo="sudo"
      echo "installing chromium, libjs-leaflet and libjs-leaflet.markercluster" >&2
      $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium libjs-leaflet libjs-leaflet.markercluster >/dev/null
    else
      echo "install chromium, libjs-leaflet and libjs-leaflet.markercluster for the dashboard's browser tests" >&2
    fi
  fi
  if ! python3 -c "import websocket" 2>/dev/null; then
    python3 -m pip install --quiet websocket-client
  fi
fi
