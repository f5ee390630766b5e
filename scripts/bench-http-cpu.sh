#!/usr/bin/env bash
# The server's CPU time per request over HTTP, which on a small shared machine is steadier than
# throughput: starts `lt serve` (the binary given, e.g. a release build) on a scratch data
# directory, drives it with wrk, and divides the server process's user + system time
# (/proc/<pid>/stat, before and after) by the requests answered.
#
#   scripts/bench-http-cpu.sh .build/release/lt [PORT] [SECONDS]
#
# Figures: GET / (the lightest answer), GET /db/doc with basic auth (2 connections), PUT of new
# documents with basic auth (4 connections). Needs wrk (Debian's package). Compare two builds by
# alternating them in one session (see docs/benchmarks.md).
set -euo pipefail
lt="${1:?usage: scripts/bench-http-cpu.sh LT_BINARY [PORT] [SECONDS]}"
port="${2:-6030}"
seconds="${3:-6}"
command -v wrk >/dev/null || { echo "wrk is missing (apt-get install wrk)" >&2; exit 1; }
data="$(mktemp -d)"
"$lt" serve --data "$data" --db-port "$port" --port $((port + 1)) --admin admin:relax > "$data/log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$port/" > /dev/null && break; sleep 0.2; done
base="http://admin:relax@127.0.0.1:$port"
curl -fs -X PUT "$base/db" > /dev/null
curl -fs -X PUT "$base/db/doc" -H 'Content-Type: application/json' -d '{"lat":1.5,"lon":2.5,"t":1}' > /dev/null
auth="Basic $(printf admin:relax | base64)"
cat > "$data/put.lua" <<LUA
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("PUT", "/db/d" .. math.random(1, 1e9) .. "-" .. counter,
    {["Content-Type"] = "application/json", ["Authorization"] = "$auth"}, '{"lat":1.5,"lon":2.5,"t":1}')
end
LUA
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
per_request() {  # wrk arguments; prints microseconds of server CPU per request
  local before after requests
  before=$(cpu_ticks)
  requests=$(wrk "$@" | awk '/requests in/ {print $1}')
  after=$(cpu_ticks)
  python3 -c "print(f'{($after - $before) / $(getconf CLK_TCK) / $requests * 1e6:.1f} µs/request ({$requests} requests)')"
}
wrk -t1 -c2 -d2s "http://127.0.0.1:$port/" > /dev/null  # warm up
echo "GET /                      $(per_request -t1 -c2 -d"${seconds}"s "http://127.0.0.1:$port/")"
echo "GET /db/doc, basic auth    $(per_request -t1 -c2 -d"${seconds}"s -H "Authorization: $auth" "http://127.0.0.1:$port/db/doc")"
echo "PUT /db/{new}, basic auth  $(per_request -t1 -c4 -d"${seconds}"s -s "$data/put.lua" "http://127.0.0.1:$port/")"
