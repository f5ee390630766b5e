#!/usr/bin/env bash
# Request shapes users send, measured with wrk (Debian's) and a small Python client against one
# lt binary on a scratch data directory: run it for two binaries, alternated, and compare.
#
#   scripts/bench-wrk.sh view-rows  BIN [PORT]   one-key map query, limit=10 (20,000 documents)
#   scripts/bench-wrk.sh view-count BIN [PORT]   one-key _count query (same data)
#   scripts/bench-wrk.sh bulk-noid  BIN [PORT]   _bulk_docs without ids: 4 clients x 25 x 1,000
#   scripts/bench-wrk.sh compare    BIN [ARGS]   lt beside the CouchDB at LT_BENCH_COUCHDB_URL, every
#                                                shape users send (scripts/bench_wrk_compare.py --help)
#
# Basic auth on every request, as devices send it; wrk -t2 -c16 -d15s. Prints the figure.
set -euo pipefail
shape=${1:?"usage: $0 view-rows|view-count|bulk-noid|compare BIN [PORT]"}
bin=${2:?"the lt binary to measure"}
if [ "$shape" = compare ]; then
    : "${LT_BENCH_COUCHDB_URL:?set LT_BENCH_COUCHDB_URL to a CouchDB URL with admin credentials}"
    exec python3 "$(dirname "$0")/bench_wrk_compare.py" --lt "$bin" --couchdb "$LT_BENCH_COUCHDB_URL" "${@:3}"
fi
port=${3:-17300}
command -v wrk > /dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
dir=$(mktemp -d)
"$bin" serve --data "$dir" --db-port "$port" --port $((port + 1)) --admin admin:relax --log-level error > /dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/_up" > /dev/null && break; sleep 0.2; done
base=http://admin:relax@127.0.0.1:$port

case $shape in
view-rows|view-count)
    curl -sf -X PUT "$base/w" > /dev/null
    python3 - "$port" <<'PY'
import base64, http.client, json, sys
port = int(sys.argv[1]); auth = "Basic " + base64.b64encode(b"admin:relax").decode()
names = ["anna", "Ånne", "bob", "Émile", "zoë", "user"]
conn = http.client.HTTPConnection("127.0.0.1", port)
for start in range(0, 20000, 2000):
    docs = [{"_id": "d%05d" % i, "user": names[i % 6] + str(i % 50), "n": i} for i in range(start, start + 2000)]
    conn.request("POST", "/w/_bulk_docs", body=json.dumps({"docs": docs}), headers={"Authorization": auth, "Content-Type": "application/json"})
    reply = conn.getresponse(); reply.read(); assert reply.status == 201, reply.status
PY
    if [ "$shape" = view-rows ]; then
        view='{"views":{"u":{"map":"function(d){emit(d.user,d.n)}"}}}'; query='key=%22%C3%89mile7%22&limit=10'
    else
        view='{"views":{"u":{"map":"function(d){emit(d.user,d.n)}","reduce":"_count"}}}'; query='key=%22%C3%89mile7%22'
    fi
    curl -sf -X PUT "$base/w/_design/v" -d "$view" > /dev/null
    curl -sf "$base/w/_design/v/_view/u?limit=1" > /dev/null  # built before measuring
    printf 'wrk.headers["Authorization"] = "Basic YWRtaW46cmVsYXg="\n' > "$dir/auth.lua"
    wrk -t2 -c16 -d15s -s "$dir/auth.lua" "http://127.0.0.1:$port/w/_design/v/_view/u?$query" | grep -E "Requests/sec"
    ;;
bulk-noid)
    curl -sf -X PUT "$base/b" > /dev/null
    python3 - "$port" <<'PY'
import base64, http.client, json, sys, threading, time
port = int(sys.argv[1]); auth = "Basic " + base64.b64encode(b"admin:relax").decode()
def body(client, batch):
    return json.dumps({"docs": [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [-122.0 + i * 1e-5, 37.0]},
                                 "properties": {"username": "user%d" % (i % 50), "timestamp": 1700000000000 + i, "client": client, "batch": batch}}
                                for i in range(1000)]}).encode()
bodies = [[body(c, b) for b in range(25)] for c in range(4)]
def run(c):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for b in bodies[c]:
        conn.request("POST", "/b/_bulk_docs", body=b, headers={"Authorization": auth, "Content-Type": "application/json"})
        reply = conn.getresponse(); reply.read(); assert reply.status == 201, reply.status
start = time.time()
threads = [threading.Thread(target=run, args=(c,)) for c in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
print("_bulk_docs without ids: %.0f docs/s" % (100000 / (time.time() - start)))
PY
    ;;
*) echo "unknown shape $shape" >&2; exit 2 ;;
esac

