#!/usr/bin/env python3
"""PouchDB 9's initial sync, lt beside Apache CouchDB: a device (PouchDB in Debian's headless
Chromium, IndexedDB adapter) pulls a database of location documents into an empty local
database, from `lt serve` (started here, durable, database API only) and from the CouchDB at
--couchdb, the same documents on both. Prints documents per second for each, and lt's advantage.

PouchDB is not in the registries this project may use (no npm): LT_BENCH_POUCHDB_DIST (or
LT_TEST_POUCHDB_DIST) names the `dist/` directory of a PouchDB 9 release fetched beside the
project. Without it this benchmark says it is skipped and exits 0. CouchDB must allow the page's
origin: the run turns CORS on there (`chttpd/enable_cors`, `cors/origins`, `cors/credentials`)
and puts the settings back afterwards. Databases named pouch-bench* are made and deleted.

Usage: bench-pouchdb.py --lt PATH/TO/lt [--couchdb http://admin:PW@127.0.0.1:5984] [--docs 10000] [--runs 3] [--json FILE]
"""

import argparse
import base64
import http.client
import json
import os
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "Browser"))
from cdp import Browser, find_chromium  # noqa: E402
from ltserve import LTServer  # noqa: E402
from pouchpage import PouchPage  # noqa: E402

ADMIN = ("bench", "bench-password")
PAGE = """<!doctype html><meta charset="utf-8"><title>PouchDB initial sync</title>
<script src="pouchdb.js"></script><script src="pouchdb.indexeddb.js"></script>
<script>window.ready = typeof PouchDB === 'function';</script>"""

# One initial sync: an empty local database pulls everything, then is destroyed.
SYNC = r"""
(async () => {
  const remote = new PouchDB(URL, {auth: {username: USER, password: PASSWORD}});
  const local = new PouchDB(NAME, {adapter: 'indexeddb'});
  const started = performance.now();
  const result = await PouchDB.replicate(remote, local, {batch_size: 100});
  const seconds = (performance.now() - started) / 1000;
  const info = await local.info();
  await local.destroy();
  return {ok: result.ok, docs: info.doc_count, written: result.docs_written, seconds};
})()
"""


class Server:
    """A CouchDB-API server reached over HTTP with admin credentials."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.user, self.password = urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or "")
        self.base = f"{parts.scheme}://{self.host}:{self.port}"
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        self.headers = {"Authorization": f"Basic {token}", "Content-Type": "application/json", "Accept": "application/json"}

    def request(self, method, path, body=None, expect=(200, 201, 202)):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body), headers=self.headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        if response.status not in expect:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data) if data else None


def location(i):
    time_ms = 1_700_000_000_000 + i * 15_000
    return {"_id": f"loc-{i:08d}", "type": "Feature", "created_at": time_ms,
            "geometry": {"type": "Point", "coordinates": [-122.0312 - (i % 997) * 0.0005, 37.3318 + (i % 1000) * 0.0007]},
            "properties": {"username": f"user{i % 50}", "timestamp": time_ms, "background": i % 3 == 0,
                           "session_id": f"s-{i // 500}", "accuracy": 5 + i % 20}}


def load(server, db, count):
    server.request("DELETE", f"/{db}", expect=(200, 202, 404))
    server.request("PUT", f"/{db}")
    for start in range(0, count, 1000):
        server.request("POST", f"/{db}/_bulk_docs", {"docs": [location(i) for i in range(start, min(count, start + 1000))]})


def enable_cors(server, origin):
    """Turns CORS on for `origin`; returns what to put back."""
    previous = {}
    for section, key, value in (("chttpd", "enable_cors", "true"), ("cors", "origins", origin), ("cors", "credentials", "true"),
                                ("cors", "headers", "accept, authorization, content-type, origin, referer")):
        previous[(section, key)] = server.request("PUT", f"/_node/_local/_config/{section}/{key}", value)
    return previous


def restore(server, previous):
    for (section, key), value in previous.items():
        if value in (None, ""):
            server.request("DELETE", f"/_node/_local/_config/{section}/{key}", expect=(200, 404))
        else:
            server.request("PUT", f"/_node/_local/_config/{section}/{key}", value)


def main():
    parser = argparse.ArgumentParser(description="PouchDB 9's initial sync from lt and from CouchDB.")
    parser.add_argument("--lt", required=True, help="the lt executable")
    parser.add_argument("--couchdb", help="CouchDB to compare with, with admin credentials")
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="syncs per server; the median is reported")
    parser.add_argument("--json", help="also write the figures to this file")
    options = parser.parse_args()
    if not 1 <= options.docs <= 1_000_000 or not 1 <= options.runs <= 20:
        parser.error("--docs must be 1–1,000,000 and --runs 1–20")
    dist = os.environ.get("LT_BENCH_POUCHDB_DIST") or os.environ.get("LT_TEST_POUCHDB_DIST")
    if not dist:
        print("PouchDB initial sync: skipped (LT_BENCH_POUCHDB_DIST is not set; docs/compatibility.md says how to fetch PouchDB 9)")
        return 0
    if find_chromium() is None:
        print("PouchDB initial sync: FAILED (no Chromium; scripts/install-deps.sh --for-tests installs it)")
        return 1
    page = PouchPage(dist, ("pouchdb.js", "pouchdb.indexeddb.js"), PAGE)
    origin = page.origin
    lt = LTServer(options.lt, ADMIN, "--database-only", "--cors-origins", origin)
    servers = [("lt", Server(f"http://{ADMIN[0]}:{ADMIN[1]}@127.0.0.1:{lt.db_port}"))]
    if options.couchdb:
        servers.append(("CouchDB", Server(options.couchdb)))
    browser = None
    restores = []
    figures = {}
    try:
        for name, server in servers[1:]:
            restores.append((server, enable_cors(server, origin)))
        for name, server in servers:
            load(server, "pouch-bench", options.docs)
        browser = Browser()
        browser.navigate(page.url)
        browser.wait("window.ready === true", what="PouchDB to load")
        version = browser.evaluate("PouchDB.version")
        print(f"PouchDB {version} (IndexedDB adapter) in headless Chromium: initial sync of {options.docs} location documents, "
              f"median of {options.runs}; load average {os.getloadavg()[0]:.2f}")
        for name, server in servers:
            rates = []
            for run in range(options.runs):
                script = (f"window.URL = {json.dumps(server.base + '/pouch-bench')}; window.USER = {json.dumps(server.user)}; "
                          f"window.PASSWORD = {json.dumps(server.password)}; window.NAME = {json.dumps(f'device-{name}-{run}')};")
                browser.evaluate(script)
                outcome = browser.evaluate(SYNC)
                if not outcome or not outcome.get("ok") or outcome.get("docs") != options.docs:
                    raise RuntimeError(f"{name}: the sync did not bring every document: {json.dumps(outcome)[:300]}")
                rates.append(options.docs / outcome["seconds"])
            figures[name] = sorted(rates)[len(rates) // 2]
            print(f"  {name:10s} {figures[name]:10.0f} docs/s   (runs: {', '.join(f'{r:.0f}' for r in rates)})")
        if "CouchDB" in figures:
            print(f"  lt's advantage: {figures['lt'] / figures['CouchDB']:.2f}×")
        if options.json:
            with open(options.json, "w") as f:
                json.dump({"pouchdb": version, "docs": options.docs, "docs_per_second": figures}, f)
    finally:
        if browser:
            browser.close()
        for name, server in servers:
            try:
                server.request("DELETE", "/pouch-bench", expect=(200, 202, 404))
            except Exception as error:  # the figures matter more than the tidying up
                print(f"  (could not delete pouch-bench on {name}: {error})")
        for server, previous in restores:
            restore(server, previous)
        lt.stop()
        page.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
