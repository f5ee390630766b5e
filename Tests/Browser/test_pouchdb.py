#!/usr/bin/env python3
"""PouchDB 9 in a real browser (Debian's headless Chromium, IndexedDB adapter) against a real
`lt serve`: replication both ways with attachments, conflicts made and resolved on the device,
deletions, design documents and views, `_local` checkpoints, a replication interrupted and
resumed, live replication with `retry` riding out a server restart, filtered (`filter`,
`doc_ids`, `selector`) replication, and pouchdb-find queries on lt. At the end every document,
leaf and attachment byte on the device equals lt's.

PouchDB is not in the registries this project may use (no npm): point LT_TEST_POUCHDB_DIST at
the `dist/` directory of a PouchDB 9 release (docs/compatibility.md). Without it this test says
it is skipped and exits 0. LT_TEST_POUCHDB_DOCS sets how many documents the device writes
(5,000 by default).

Usage: LT_TEST_POUCHDB_DIST=/path/to/pouchdb/dist test_pouchdb.py --lt PATH/TO/lt
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, find_chromium  # noqa: E402
from pouchpage import PouchPage  # noqa: E402

ADMIN = ("admin", "pouch-admin-pw")

PAGE = """<!doctype html><meta charset="utf-8"><title>PouchDB against lt</title>
<script src="pouchdb.js"></script><script src="pouchdb.indexeddb.js"></script><script src="pouchdb.find.js"></script>
<script>window.ready = typeof PouchDB === 'function';</script>"""

# Helpers every step uses, defined once in the page.
HELPERS = r"""
window.T = {
  remote(name) { return new PouchDB(LT + '/' + name, {auth: {username: ADMIN[0], password: ADMIN[1]}}); },
  local(name) { return new PouchDB(name, {adapter: 'indexeddb'}); },
  id(i) { return 'fix-' + String(i).padStart(3, '0'); },
  text(i) { return 'Freeway Drive, Cupertino: 37.33, -122.03. '.repeat(30) + i; },
  bytes(i) { const b = new Uint8Array(2048); let x = i * 7919 + 1; for (let k = 0; k < b.length; k++) { x = (x * 1103515245 + 12345) >>> 0; b[k] = x >>> 24; } return b; },
  async blobBytes(blob) { return new Uint8Array(await blob.arrayBuffer()); },
  same(a, b) { if (a.length !== b.length) return false; for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false; return true; },
  // Every document with all its leaves and attachment bodies, comparable across databases.
  async snapshot(db) {
    const all = await db.allDocs({include_docs: true, conflicts: true});
    const out = {};
    for (const row of all.rows) {
      const leaves = await db.get(row.id, {open_revs: 'all', revs: true, attachments: true, binary: false});
      out[row.id] = leaves.filter(l => l.ok).map(l => JSON.stringify(T.canonical(l.ok))).sort();
    }
    return out;
  },
  canonical(v) {
    if (Array.isArray(v)) return v.map(T.canonical);
    if (v && typeof v === 'object') { const o = {}; for (const k of Object.keys(v).sort()) { if (k !== 'digest' && k !== 'revpos' && k !== 'length') o[k] = T.canonical(v[k]); } return o; }
    return v;
  },
  diff(a, b) {
    const ids = new Set([...Object.keys(a), ...Object.keys(b)]);
    const differing = [...ids].filter(id => JSON.stringify(a[id]) !== JSON.stringify(b[id]));
    return {count: ids.size, differing: differing.slice(0, 5), differingCount: differing.length};
  },
  wait(ms) { return new Promise(r => setTimeout(r, ms)); },
  async until(fn, ms = 20000) { const end = Date.now() + ms; while (Date.now() < end) { try { if (await fn()) return true; } catch (e) {} await T.wait(200); } return false; },
};
true
"""

STEPS = [
    ("push documents, text and binary attachments, a design document and deletions from the device", r"""
      const device = T.local('device'), remote = T.remote('pouch');
      const docs = [];
      for (let i = 0; i < N; i++) {
        const doc = {_id: T.id(i), n: i, lat: 37.3 + i / 1000, lon: -122.0};
        if (i % 10 === 0) doc._attachments = {'notes.txt': {content_type: 'text/plain', data: new Blob([T.text(i)], {type: 'text/plain'})}};
        if (i % 25 === 0) doc._attachments = Object.assign(doc._attachments || {}, {'photo.bin': {content_type: 'application/octet-stream', data: new Blob([T.bytes(i)])}});
        docs.push(doc);
      }
      docs.push({_id: '_design/app', views: {by_n: {map: 'function (doc) { if (doc.n !== undefined) emit(doc.n, null); }'}},
                 filters: {even: 'function (doc) { return doc.n % 2 === 0; }'}});
      await device.bulkDocs(docs);
      for (const id of ['fix-003', 'fix-013', 'fix-023']) { const d = await device.get(id); await device.remove(d); }
      const result = await device.replicate.to(remote);
      const text = await remote.getAttachment('fix-010', 'notes.txt');
      const photo = await remote.getAttachment('fix-050', 'photo.bin');
      const deleted = await remote.get('fix-003').then(() => false, e => e.status === 404);
      return {ok: result.ok && result.docs_written === N + 1 && (await text.text()) === T.text(10)
                  && T.same(await T.blobBytes(photo), T.bytes(50)) && deleted,
              detail: {docs_written: result.docs_written, deleted}};
    """),
    ("the design document's view answers on lt", r"""
      const rows = (await T.remote('pouch').query('app/by_n', {startkey: N - 5})).rows.map(r => r.key);
      return {ok: JSON.stringify(rows) === JSON.stringify([N - 5, N - 4, N - 3, N - 2, N - 1]), detail: rows};
    """),
    ("the replication left its checkpoint in _local on both sides; a second run reads nothing", r"""
      const device = T.local('device'), remote = T.remote('pouch');
      const again = await device.replicate.to(remote);
      const checkpoints = await fetch(LT + '/pouch/_local_docs', {headers: {Authorization: 'Basic ' + btoa(ADMIN.join(':'))}}).then(r => r.json());
      return {ok: again.docs_read === 0 && again.docs_written === 0 && checkpoints.rows.length >= 1, detail: {again: again.docs_read, checkpoints: checkpoints.rows.length}};
    """),
    ("pull into a fresh device: every document, leaf and attachment byte equal", r"""
      const copy = T.local('copy'), remote = T.remote('pouch');
      const result = await copy.replicate.from(remote);
      const photo = await copy.getAttachment('fix-075', 'photo.bin');
      const d = T.diff(await T.snapshot(copy), await T.snapshot(remote));
      return {ok: result.ok && d.differingCount === 0 && d.count > N - 10 && T.same(await T.blobBytes(photo), T.bytes(75)), detail: d};
    """),
    ("a conflict made on two devices, resolved on one (loser deleted, winner updated), is resolved on lt", r"""
      const device = T.local('device'), copy = T.local('copy'), remote = T.remote('pouch');
      const a = await device.get('fix-100'); a.by = 'device'; await device.put(a);
      const b = await copy.get('fix-100'); b.by = 'copy'; await copy.put(b);
      await device.replicate.to(remote); await copy.replicate.to(remote);
      await device.replicate.from(remote);
      const seen = await device.get('fix-100', {conflicts: true});
      const onRemote = await remote.get('fix-100', {conflicts: true});
      if (!seen._conflicts || !onRemote._conflicts) return {ok: false, detail: {device: seen._conflicts, remote: onRemote._conflicts}};
      for (const loser of seen._conflicts) await device.remove('fix-100', loser);
      seen.resolved = true; delete seen._conflicts; await device.put(seen);
      await device.replicate.to(remote);
      const after = await remote.get('fix-100', {conflicts: true});
      await copy.replicate.from(remote);
      const onCopy = await copy.get('fix-100', {conflicts: true});
      return {ok: !after._conflicts && after.resolved === true && !onCopy._conflicts && onCopy.resolved === true,
              detail: {remote: after._conflicts || null, copy: onCopy._conflicts || null}};
    """),
    ("an edit on lt (new attachment, deletion) pulls to the device", r"""
      const device = T.local('device'), remote = T.remote('pouch');
      const doc = await remote.get('fix-020');
      await remote.putAttachment('fix-020', 'track.json', doc._rev, new Blob([JSON.stringify({points: [1, 2, 3]})], {type: 'application/json'}), 'application/json');
      const gone = await remote.get('fix-021'); await remote.remove(gone);
      await device.replicate.from(remote);
      const track = await device.getAttachment('fix-020', 'track.json');
      const deleted = await device.get('fix-021').then(() => false, e => e.status === 404);
      const notes = await device.getAttachment('fix-020', 'notes.txt');
      return {ok: (await track.text()) === JSON.stringify({points: [1, 2, 3]}) && deleted && (await notes.text()) === T.text(20), detail: {deleted}};
    """),
    ("a replication interrupted after its first batch resumes from its checkpoint", r"""
      const big = T.local('big'), remote = T.remote('pouch_resume');
      const docs = []; for (let i = 0; i < 600; i++) docs.push({_id: 'r' + String(i).padStart(4, '0'), n: i});
      await big.bulkDocs(docs);
      const first = big.replicate.to(remote, {batch_size: 50, batches_limit: 1});
      let written = 0;
      await new Promise(resolve => {
        first.on('change', info => { written = info.docs_written; if (written >= 100) first.cancel(); });
        first.on('complete', resolve); first.on('error', resolve);
      });
      await T.wait(300);
      const second = await big.replicate.to(remote, {batch_size: 50});
      const info = await remote.info();
      return {ok: written < 600 && second.docs_read < 600 && info.doc_count === 600, detail: {first: written, second: second.docs_read, total: info.doc_count}};
    """),
    ("filtered replication: a filter function, doc_ids and a selector carry only what they select", r"""
      const remote = T.remote('pouch');
      const even = T.local('even'), some = T.local('some'), chosen = T.local('chosen');
      await even.replicate.from(remote, {filter: 'app/even'});
      await some.replicate.from(remote, {doc_ids: ['fix-001', 'fix-002', T.id(N - 1)]});
      await chosen.replicate.from(remote, {selector: {n: {$gte: N - 10}}});
      const e = await even.allDocs(), s = await some.allDocs(), c = await chosen.allDocs();
      const evenOnly = e.rows.every(r => r.id.startsWith('_design') || Number(r.id.slice(4)) % 2 === 0);
      return {ok: evenOnly && e.rows.length > N / 2 - 10 && s.rows.length === 3 && c.rows.length === 10,
              detail: {even: e.rows.length, doc_ids: s.rows.length, selector: c.rows.length}};
    """),
    ("pouchdb-find on lt: createIndex, find with a sort, explain names the index", r"""
      const remote = T.remote('pouch');
      const index = await remote.createIndex({index: {fields: ['n']}, name: 'by-n', ddoc: 'by-n'});
      const found = await remote.find({selector: {n: {$gt: N - 10}}, sort: ['n'], fields: ['_id', 'n'], limit: 3});
      const explained = await remote.explain({selector: {n: {$gt: N - 10}}, sort: ['n']});
      return {ok: index.result !== undefined && JSON.stringify(found.docs.map(d => d.n)) === JSON.stringify([N - 9, N - 8, N - 7]) && explained.index.name === 'by-n',
              detail: {found: found.docs.map(d => d.n), index: explained.index && explained.index.name}};
    """),
]

LIVE_START = r"""
  const device = T.local('device'), remote = T.remote('pouch');
  window.liveErrors = [];
  window.live = device.sync(remote, {live: true, retry: true, back_off_function: d => Math.min(1000, (d || 100) * 2)});
  window.live.on('error', e => window.liveErrors.push(String(e)));
  await device.put({_id: 'live-1', n: -1});
  const up = await T.until(async () => (await remote.get('live-1')).n === -1);
  return {ok: up, detail: {}};
"""

LIVE_AFTER_RESTART = r"""
  const device = T.local('device'), remote = T.remote('pouch');
  await device.put({_id: 'live-2', n: -2});
  const up = await T.until(async () => (await remote.get('live-2')).n === -2, 30000);
  await fetch(LT + '/pouch/live-3', {method: 'PUT', headers: {Authorization: 'Basic ' + btoa(ADMIN.join(':')), 'Content-Type': 'application/json'}, body: JSON.stringify({n: -3})});
  const down = await T.until(async () => (await device.get('live-3')).n === -3, 30000);
  window.live.cancel();
  const d = T.diff(await T.snapshot(device), await T.snapshot(remote));
  return {ok: up && down && d.differingCount === 0, detail: {up, down, diff: d, errors: window.liveErrors.slice(0, 3)}};
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`lt serve` on fixed ports and a data directory that outlive a restart."""

    def __init__(self, lt, cors_origin):
        self.lt, self.cors_origin = lt, cors_origin
        self.directory = tempfile.mkdtemp(prefix="lt-pouch-")
        self.port, self.app_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.start()

    def start(self):
        self.process = subprocess.Popen(
            [self.lt, "serve", "--data", self.directory, "--db-port", str(self.port), "--port", str(self.app_port),
             "--admin", f"{ADMIN[0]}:{ADMIN[1]}", "--cors-origins", self.cors_origin, "--log-level", "warning", "--tiles", "none"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        while "database API" not in (line := self.process.stdout.readline()):
            if not line:
                raise RuntimeError("lt serve did not start")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    options = parser.parse_args()
    dist = os.environ.get("LT_TEST_POUCHDB_DIST")
    if not dist:
        print("PouchDB browser test: skipped (LT_TEST_POUCHDB_DIST is not set; docs/compatibility.md)")
        return 0
    if find_chromium() is None:
        print("PouchDB browser test: FAILED (no Chromium; scripts/install-deps.sh --for-tests installs it)")
        return 1
    page = PouchPage(dist, ("pouchdb.js", "pouchdb.indexeddb.js", "pouchdb.find.js"), PAGE)
    origin = page.origin
    server = Server(options.lt, origin)
    browser = Browser()
    results = []
    try:
        browser.navigate(page.url)
        browser.wait("window.ready === true", what="PouchDB to load")
        version = browser.evaluate("PouchDB.version")
        count = int(os.environ.get("LT_TEST_POUCHDB_DOCS", "5000"))
        browser.evaluate(f"window.LT = {json.dumps(server.url)}; window.ADMIN = {json.dumps(list(ADMIN))}; window.N = {count}; {HELPERS}")

        def run(name, body):
            started = time.time()
            try:
                outcome = browser.evaluate(f"(async () => {{ {body} }})()")
            except RuntimeError as error:
                outcome = {"ok": False, "detail": str(error)[:500]}
            ok = bool(outcome and outcome.get("ok"))
            results.append((ok, name))
            print(f"  {'ok  ' if ok else 'FAIL'}  {name} ({time.time() - started:.1f} s)" + ("" if ok else f": {json.dumps(outcome)[:600]}"))

        print(f"PouchDB {version} (IndexedDB adapter) in headless Chromium against {server.url}, {count} documents")
        for name, body in STEPS:
            run(name, body)
        run("live sync with retry: a device write reaches lt", LIVE_START)
        server.stop()
        time.sleep(2)  # the device writes while the server is down; retry keeps trying
        browser.evaluate("T.local('device').put({_id: 'offline-1', n: -10}).then(() => true)")
        server.start()
        run("live sync rides out a server restart: writes both ways arrive; device and lt equal", LIVE_AFTER_RESTART)
        arrived = browser.evaluate("T.remote('pouch').get('offline-1').then(d => d.n === -10, () => false)")
        results.append((bool(arrived), "a write made while lt was down arrived after it came back"))
        print(f"  {'ok  ' if arrived else 'FAIL'}  a write made while lt was down arrived after it came back")
    finally:
        browser.close()
        server.stop()
        page.stop()
        shutil.rmtree(server.directory, ignore_errors=True)
    passed = sum(1 for ok, _ in results if ok)
    print(f"PouchDB browser test: {passed} of {len(results)} steps passed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
