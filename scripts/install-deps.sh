#!/usr/bin/env bash
# Installs what the build and the tests need beyond Swift, where it is missing:
# duktape-dev (the JavaScript engine for design documents; without it lt builds, and
# JavaScript requests answer with an error) and CouchDB-Python 1.2 (for its test suite).
set -euo pipefail
if [ ! -f /usr/include/duktape.h ] || [ ! -f /usr/include/sqlite3.h ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq duktape-dev libsqlite3-dev >/dev/null
  else
    echo "install duktape-dev and libsqlite3-dev (Debian/Ubuntu) for the full build" >&2
  fi
fi
if ! python3 -c "import couchdb" 2>/dev/null; then
  python3 -m pip install --quiet couchdb==1.2
fi
