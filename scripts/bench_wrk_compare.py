#!/usr/bin/env python3
"""wrk against lt and a CouchDB in the same run, request shapes as users send them.

    scripts/bench-wrk.sh compare BIN            (CouchDB from LT_BENCH_COUCHDB_URL)
    python3 scripts/bench_wrk_compare.py --lt BIN --couchdb http://admin:pw@127.0.0.1:5984

Starts `lt serve` (BIN) on a scratch directory, loads the same data into both servers, then runs
Debian's `wrk` with one Lua script per shape against each server in turn (CouchDB first, then lt,
`--rounds` times; the two bulk shapes take turns round by round), every request signed with Basic auth:

    put          PUT of a new location document, a fresh id each request
    get          GET of one of 10,000 location documents, at random
    bulk-ids     POST _bulk_docs, 1,000 location documents a request, ids set
    bulk-noid    POST _bulk_docs, the same documents without ids (server-assigned)
    changes      GET _changes?style=all_docs&limit=500 (a device's first pull page)
    find         POST _find on an indexed field, limit 25, one of 50 users at random
    device       100 users, each with a private database and their own password: three PUTs of
                 a location then a pull (_changes?style=all_docs&limit=100), the user's
                 credentials on every request

Every shape's Lua script writes one RESULT line (requests, duration, latency p50/p99, errors,
where any answer of status 400 or more is an error); a run with errors is reported as such.
Prints a Markdown table of requests/s (documents/s for the bulk shapes) and lt's ratio, and writes
the figures as JSON with --json.
"""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

from couch_peer import base_and_auth, rss_mib

DOCS = 10_000
USERS = 50
DEVICES = 100
DEVICE_PASSWORD = "device-password"

# One location document as a Lua format string: id (or nothing), longitude, latitude, user, time.
LOCATION = ('{%s"type":"Feature","geometry":{"type":"Point","coordinates":[%.6f,%.6f]},'
            '"properties":{"username":"user%d","timestamp":%d,"background":false,"session_id":"s-%d"}}')

LUA_COMMON = r'''
local threads = {}
local made = 0
function setup(thread)
  made = made + 1
  thread:set("thread_number", made)
  table.insert(threads, thread)
end
counter = 0
function init(args)
  prefix = args[1] .. "-" .. thread_number .. "-"
  math.randomseed(thread_number * 7919 + os.time())
end
function location(id, n)
  local head = ""
  if id then head = '"_id":"' .. id .. '",' end
  return string.format('{%s"type":"Feature","geometry":{"type":"Point","coordinates":[%.6f,%.6f]},'
    .. '"properties":{"username":"user%d","timestamp":%.0f,"background":false,"session_id":"s-%d"}}',
    head, -122.0312 - (n % 997) * 0.0005, 37.3318 + (n % 1000) * 0.0007, n % 50, 1700000000000 + n * 15000, math.floor(n / 500))
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors":%d,"status_errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout, e.status))
end
'''

LUA_SHAPES = {
    "put": r'''
wrk.method = "PUT"
request = function()
  counter = counter + 1
  return wrk.format("PUT", "/wrk-put/" .. prefix .. counter, nil, location(nil, counter))
end
''',
    "get": r'''
request = function()
  return wrk.format("GET", string.format("/wrk-data/loc-%08d", math.random(0, 9999)))
end
''',
    "bulk-ids": r'''
request = function()
  counter = counter + 1
  local docs = {}
  for i = 1, 1000 do docs[i] = location(prefix .. counter .. "-" .. i, counter * 1000 + i) end
  return wrk.format("POST", "/wrk-bulk/_bulk_docs", nil, '{"docs":[' .. table.concat(docs, ",") .. ']}')
end
''',
    "bulk-noid": r'''
request = function()
  counter = counter + 1
  local docs = {}
  for i = 1, 1000 do docs[i] = location(nil, counter * 1000 + i) end
  return wrk.format("POST", "/wrk-noid/_bulk_docs", nil, '{"docs":[' .. table.concat(docs, ",") .. ']}')
end
''',
    "changes": r'''
request = function()
  return wrk.format("GET", "/wrk-data/_changes?style=all_docs&limit=500")
end
''',
    "find": r'''
request = function()
  return wrk.format("POST", "/wrk-data/_find", nil,
    string.format('{"selector":{"properties.username":"user%d"},"limit":25}', math.random(0, 49)))
end
''',
    "device": r'''
request = function()
  counter = counter + 1
  if counter % 4 == 1 then device = math.random(0, #device_auth - 1) end
  local headers = { ["Authorization"] = device_auth[device + 1], ["Content-Type"] = "application/json" }
  local db = string.format("/wrk-dev-%03d", device)
  if counter % 4 == 0 then
    return wrk.format("GET", db .. "/_changes?style=all_docs&limit=100", headers)
  end
  return wrk.format("PUT", db .. "/" .. prefix .. counter, headers, location(nil, counter))
end
''',
}

# Which shapes count documents rather than requests, and how many connections each uses.
DOCS_PER_REQUEST = {"bulk-ids": 1000, "bulk-noid": 1000}
CONNECTIONS = {"bulk-ids": 4, "bulk-noid": 4}


class Server:
    """One side: where it answers and the admin's Authorization header."""

    def __init__(self, name, url):
        self.name = name
        self.base, self.auth = base_and_auth(url)
        parsed = urllib.parse.urlsplit(self.base)
        self.host, self.port = parsed.hostname, parsed.port

    def send(self, method, path, body=None, expect=(200, 201, 202), auth=None):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=300)
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Authorization": auth or self.auth, "Content-Type": "application/json"}
        connection.request(method, path, body=data, headers=headers)
        reply = connection.getresponse()
        text = reply.read()
        connection.close()
        if reply.status not in expect:
            sys.exit(f"{self.name}: {method} {path} answered {reply.status}: {text[:300]!r}")
        return json.loads(text) if text else None

    def recreate(self, name):
        self.send("DELETE", "/" + name, expect=(200, 202, 404))
        self.send("PUT", "/" + name)

    def prepare(self):
        """The databases every shape reads or writes, the same on both sides."""
        for name in ["wrk-put", "wrk-bulk", "wrk-noid", "wrk-data"]:
            self.recreate(name)
        for start in range(0, DOCS, 1000):
            docs = [json.loads(LOCATION % ('"_id":"loc-%08d",' % n, -122.0312 - (n % 997) * 0.0005,
                                           37.3318 + (n % 1000) * 0.0007, n % USERS, 1700000000000 + n * 15000, n // 500))
                    for n in range(start, start + 1000)]
            self.send("POST", "/wrk-data/_bulk_docs", {"docs": docs})
        self.send("POST", "/wrk-data/_index", {"index": {"fields": ["properties.username"]}, "name": "by-user", "type": "json"})
        self.send("POST", "/wrk-data/_find", {"selector": {"properties.username": "user0"}, "limit": 1})  # built now
        self.send("PUT", "/_users", expect=(201, 412))
        for d in range(DEVICES):
            name = "wrkdev%03d" % d
            existing = self.send("GET", "/_users/org.couchdb.user:" + name, expect=(200, 404))
            user = {"_id": "org.couchdb.user:" + name, "name": name, "password": DEVICE_PASSWORD, "roles": [], "type": "user"}
            if existing and "_rev" in existing:
                user["_rev"] = existing["_rev"]
            self.send("PUT", "/_users/org.couchdb.user:" + name, user)
            db = "wrk-dev-%03d" % d
            self.recreate(db)
            self.send("PUT", f"/{db}/_security", {"admins": {"names": [], "roles": []}, "members": {"names": [name], "roles": []}})
        # Every device signs in once before measuring, so neither side is timed hashing a password
        # the first time (both cache a verified password).
        for d in range(DEVICES):
            self.send("GET", "/wrk-dev-%03d" % d, auth=device_authorization(d))

    def clean(self):
        for name in ["wrk-put", "wrk-bulk", "wrk-noid", "wrk-data"] + ["wrk-dev-%03d" % d for d in range(DEVICES)]:
            self.send("DELETE", "/" + name, expect=(200, 202, 404))
        for d in range(DEVICES):
            path = "/_users/org.couchdb.user:wrkdev%03d" % d
            existing = self.send("GET", path, expect=(200, 404))
            if existing and "_rev" in existing:
                self.send("DELETE", path + "?rev=" + existing["_rev"])


def device_authorization(d):
    return "Basic " + base64.b64encode(f"wrkdev{d:03d}:{DEVICE_PASSWORD}".encode()).decode()


def lua_script(shape, server, directory):
    """The Lua file of one shape against one server: the shared helpers, the admin's headers and
    (for the device shape) every device's Authorization header."""
    lines = [LUA_COMMON,
             f'wrk.headers["Authorization"] = "{server.auth}"',
             'wrk.headers["Content-Type"] = "application/json"']
    if shape == "device":
        lines.append("device_auth = {" + ",".join(f'"{device_authorization(d)}"' for d in range(DEVICES)) + "}")
        lines.append("device = 0")
    lines.append(LUA_SHAPES[shape])
    path = os.path.join(directory, f"{shape}-{server.name}.lua")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def run_wrk(shape, server, directory, seconds, round_number):
    script = lua_script(shape, server, directory)
    connections = CONNECTIONS.get(shape, 8)
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", "-s", script, server.base,
               "--", f"r{round_number}{int(time.time())}"]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    match = re.search(r"^RESULT (.*)$", output, re.M)
    if not match:
        sys.exit(f"wrk printed no result for {shape} on {server.name}:\n{output}")
    result = json.loads(match.group(1))
    per_request = DOCS_PER_REQUEST.get(shape, 1)
    result["rate"] = result["requests"] * per_request / (result["duration_us"] / 1e6)
    return result


def start_lt(binary, directory, port):
    process = subprocess.Popen([binary, "serve", "--data", directory, "--db-port", str(port), "--port", str(port + 1),
                                "--admin", "admin:relax", "--log-level", "error"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/_up")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            pass
        time.sleep(0.1)
    process.kill()
    sys.exit("lt serve did not start")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lt", required=True, help="the lt binary (a release build)")
    parser.add_argument("--couchdb", required=True, help="a CouchDB's URL with an admin's credentials")
    parser.add_argument("--couchdb-pid", type=int, help="CouchDB's beam process, for its RSS")
    parser.add_argument("--seconds", type=int, default=10, help="each wrk run's duration")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each shape on each server, alternated")
    parser.add_argument("--shapes", default=",".join(LUA_SHAPES), help="comma-separated shapes")
    parser.add_argument("--port", type=int, default=17320)
    parser.add_argument("--json", help="write the figures here")
    options = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    shapes = options.shapes.split(",")
    for shape in shapes:
        if shape not in LUA_SHAPES:
            sys.exit(f"unknown shape {shape}; known: {', '.join(LUA_SHAPES)}")
    scratch = tempfile.mkdtemp(prefix="lt-bench-wrk-")
    lt_process = start_lt(options.lt, os.path.join(scratch, "data"), options.port)
    try:
        sides = [Server("CouchDB", options.couchdb), Server("lt", f"http://admin:relax@127.0.0.1:{options.port}")]
        for side in sides:
            print(f"loading {side.name} ({side.base})…", file=sys.stderr, flush=True)
            side.prepare()
        results = {shape: {side.name: [] for side in sides} for shape in shapes}
        # The two bulk shapes take turns, the first of a round alternating, so that neither
        # always writes into the larger files (both servers slow as their files grow).
        bulk = [shape for shape in shapes if shape in ("bulk-ids", "bulk-noid")]
        groups = [[shape] for shape in shapes if shape not in bulk]
        if bulk:
            groups.insert(min(shapes.index(shape) for shape in bulk), bulk)
        for group in groups:
            for round_number in range(options.rounds):
                for shape in (group if round_number % 2 == 0 else list(reversed(group))):
                    for side in sides:
                        result = run_wrk(shape, side, scratch, options.seconds, round_number)
                        results[shape][side.name].append(result)
                        print(f"{shape:10} {side.name:8} round {round_number + 1}: {result['rate']:,.0f}/s, "
                              f"p50 {result['p50_us'] / 1000:.1f} ms, p99 {result['p99_us'] / 1000:.1f} ms, "
                              f"errors {result['errors']}", file=sys.stderr, flush=True)
        memory = {"lt": rss_mib(lt_process.pid)}
        if options.couchdb_pid:
            memory["CouchDB"] = rss_mib(options.couchdb_pid)
        print(f"\nwrk -t2, {options.seconds} s a run, {options.rounds} rounds alternated; "
              "median requests/s (documents/s for _bulk_docs); p99 latency of the median run\n")
        print("| shape | CouchDB | lt | lt ÷ CouchDB | p99 CouchDB / lt (ms) | errors |")
        print("|---|---|---|---|---|---|")
        for shape in shapes:
            couch = statistics.median(r["rate"] for r in results[shape]["CouchDB"])
            ours = statistics.median(r["rate"] for r in results[shape]["lt"])
            p99 = [statistics.median(r["p99_us"] for r in results[shape][s.name]) / 1000 for s in sides]
            errors = sum(r["errors"] for s in sides for r in results[shape][s.name])
            print(f"| {shape} | {couch:,.0f} | {ours:,.0f} | {ours / couch:.2f}× | {p99[0]:.1f} / {p99[1]:.1f} | {errors} |")
        if len(bulk) == 2:
            ratios = [statistics.median(r["rate"] for r in results["bulk-noid"][side.name])
                      / statistics.median(r["rate"] for r in results["bulk-ids"][side.name]) for side in sides]
            print("\nwithout ids ÷ with ids: " + ", ".join(f"{side.name} {ratio:.2f}" for side, ratio in zip(sides, ratios)))
        if memory:
            print("\nRSS after the run: " + ", ".join(f"{name} {mib:,.0f} MiB" for name, mib in memory.items()))
        for side in sides:
            side.clean()
        if options.json:
            with open(options.json, "w") as f:
                json.dump({"seconds": options.seconds, "rounds": options.rounds, "results": results, "rss_mib": memory}, f, indent=1)
        if any(r["errors"] for shape in shapes for s in sides for r in results[shape][s.name]):
            sys.exit("some requests failed (see errors above)")
    finally:
        lt_process.terminate()
        lt_process.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
