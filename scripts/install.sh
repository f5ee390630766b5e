#!/usr/bin/env bash
# Installs lt as a systemd service: a release build with jemalloc (scripts/install-deps.sh sees
# to Debian's packages), then the binary (/usr/local/bin/lt), the unit
# (/etc/systemd/system/lt.service, and lt-backup.service/.timer for nightly backups, from
# deploy/), a settings file (/etc/lt/lt.yaml, kept if there
# is one) and docs/deploying.md. It starts nothing: edit /etc/lt/lt.yaml, then
# `systemctl enable --now lt`. Run as root. With DESTDIR=DIR it installs under DIR instead and
# leaves systemd alone (packaging; CI checks the result that way). LT_BINARY=PATH installs that
# binary instead of building one (CI hands it the debug build its tests used, so that the check
# costs no release build of the whole package).
set -euo pipefail
cd "$(dirname "$0")/.."
destdir="${DESTDIR:-}"
if [ -z "$destdir" ] && [ "$(id -u)" != 0 ]; then
  echo "install.sh: run as root (or DESTDIR=DIR to install under DIR)" >&2
  exit 1
fi
scripts/install-deps.sh
if [ -n "${LT_BINARY:-}" ]; then
  bin="$LT_BINARY"
  [ -x "$bin" ] || { echo "install.sh: LT_BINARY=$bin is not an executable" >&2; exit 1; }
else
  swift build -c release --product lt
  bin="$(swift build -c release --show-bin-path)/lt"
fi
install -D -m 0755 "$bin" "$destdir/usr/local/bin/lt"
install -D -m 0644 deploy/lt.service "$destdir/etc/systemd/system/lt.service"
install -D -m 0644 deploy/lt-backup.service "$destdir/etc/systemd/system/lt-backup.service"
install -D -m 0644 deploy/lt-backup.timer "$destdir/etc/systemd/system/lt-backup.timer"
if [ -e "$destdir/etc/lt/lt.yaml" ]; then
  echo "install.sh: keeping $destdir/etc/lt/lt.yaml"
else
  # Root-only: it may hold the admin's password (systemd hands the service a copy).
  install -D -m 0600 deploy/lt.yaml "$destdir/etc/lt/lt.yaml"
fi
install -D -m 0644 docs/deploying.md "$destdir/usr/local/share/doc/lt/deploying.md"
"$destdir/usr/local/bin/lt" serve --help >/dev/null  # the binary runs here
# The settings file as the server will read it (keys, types), without starting anything.
"$destdir/usr/local/bin/lt" serve --config "$destdir/etc/lt/lt.yaml" --data "$destdir/var/lib/lt" --print-config >/dev/null
if command -v systemd-analyze >/dev/null 2>&1; then
  # The unit as systemd reads it, against the binary just installed (under DESTDIR too).
  check=$(mktemp -d)
  trap 'rm -rf "$check"' EXIT
  for unit in lt.service lt-backup.service lt-backup.timer; do
    sed "s#/usr/local/bin/lt#$destdir/usr/local/bin/lt#" "deploy/$unit" > "$check/$unit"
  done
  systemd-analyze verify "$check/lt.service" "$check/lt-backup.service" "$check/lt-backup.timer"
fi
if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
echo "install.sh: installed under ${destdir:-/}; next: edit /etc/lt/lt.yaml (admin, TLS), then systemctl enable --now lt"
