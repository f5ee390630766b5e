#!/usr/bin/env python3
"""Record what Apache CouchDB's own replicator sends and receives, for Tests/Compatibility.

Needs a running CouchDB (LT_TEST_COUCHDB_URL=http://admin:pw@127.0.0.1:5984; see
docs/compatibility.md). It writes a source database on that CouchDB (documents with gzip-
compressible text and binary attachments, a design document, a conflict, a deletion), then
runs CouchDB's replicator through scripts/record-exchanges.py twice in each direction:

- pull: CouchDB replicates from the source *through the proxy*: the recording holds what a
  replication source must answer (lt as the source CouchDB pulls from);
- push: CouchDB replicates *through the proxy* into an empty target: the recording holds what
  a replication target must accept (lt as the target CouchDB pushes to);

and again after more edits (incremental: atts_since, checkpoints with `_rev` 0-N). Writes
Tests/Compatibility/Fixtures/couchdb-replicator.json: the seeds (each source state as
`open_revs=all` documents with their history and attachments), both recordings, and the
target's final state as CouchDB holds it.
"""
import base64
import json
import os
import random
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from couch_peer import couch_url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Tests", "Compatibility", "Fixtures", "couchdb-replicator.json")
PROXY_PORT = int(os.environ.get("LT_RECORD_PROXY_PORT", "5990"))



def request(method, url, body=None, headers=None):
    parts = urllib.parse.urlsplit(url)
    plain = urllib.parse.urlunsplit((parts.scheme, parts.hostname + (f":{parts.port}" if parts.port else ""),
                                     parts.path, parts.query, ""))
    headers = dict(headers or {})
    headers.setdefault("Accept", "application/json")
    if parts.username:
        token = base64.b64encode(f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}".encode()).decode()
        headers["Authorization"] = "Basic " + token
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(plain, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=300) as answer:
            raw = answer.read()
            return answer.status, raw
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def jrequest(method, url, body=None):
    status, raw = request(method, url, body)
    return status, (json.loads(raw) if raw else None)


NOTES = ("Freeway Drive, Cupertino: 37.33, -122.03. " * 30).encode()  # ~1.2 KB, compressible


def photo(seed):
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(2048))


def put_attachment(db, doc_id, rev, name, content_type, data):
    status, raw = request("PUT", f"{db}/{doc_id}/{name}?rev={rev}", data, {"Content-Type": content_type})
    assert status == 201, (status, raw)
    return json.loads(raw)["rev"]


def seed_first(db):
    docs = [{"_id": f"doc-{i:03d}", "n": i, "kind": "fix", "lat": 37.3 + i / 1000, "lon": -122.0 - i / 1000}
            for i in range(40)]
    docs.append({"_id": "_design/app", "views": {"by_n": {"map": "function(doc){ if (doc.n !== undefined) emit(doc.n, null); }"}},
                 "filters": {"even": "function(doc){ return doc.n % 2 === 0; }"}})
    status, rows = jrequest("POST", f"{db}/_bulk_docs", {"docs": docs})
    assert status == 201, rows
    revs = {row["id"]: row["rev"] for row in rows}
    for i in range(0, 40, 4):
        revs[f"doc-{i:03d}"] = put_attachment(db, f"doc-{i:03d}", revs[f"doc-{i:03d}"], "notes.txt", "text/plain", NOTES)
    for i in range(0, 40, 5):
        revs[f"doc-{i:03d}"] = put_attachment(db, f"doc-{i:03d}", revs[f"doc-{i:03d}"], "photo.bin", "application/octet-stream", photo(i))
    # An edit after the attachments: their revpos stays behind the document's generation.
    for doc_id in ("doc-000", "doc-020"):
        status, doc = jrequest("GET", f"{db}/{doc_id}")
        doc["edited"] = True
        status, row = jrequest("PUT", f"{db}/{doc_id}", doc)
        assert status == 201, row
    # A conflict: a second branch written as a replicator would.
    status, row = jrequest("POST", f"{db}/_bulk_docs", {"new_edits": False, "docs": [
        {"_id": "doc-001", "_rev": "2-" + "b" * 32, "_revisions": {"start": 2, "ids": ["b" * 32, revs["doc-001"].split("-")[1]]},
         "n": 1, "branch": "device"}]})
    assert status == 201, row
    # A deletion.
    status, row = jrequest("DELETE", f"{db}/doc-039?rev={revs['doc-039']}")
    assert status == 200, row


def seed_second(db):
    # Body edits of documents with attachments (stubs: the target has their attachments).
    for doc_id in ("doc-004", "doc-008", "doc-010"):
        status, doc = jrequest("GET", f"{db}/{doc_id}")
        doc["edited"] = 2
        status, row = jrequest("PUT", f"{db}/{doc_id}", doc)
        assert status == 201, row
    # A new attachment on a document that has one: only the new one's body must travel.
    status, doc = jrequest("GET", f"{db}/doc-012")
    put_attachment(db, "doc-012", doc["_rev"], "track.json", "application/json", json.dumps({"points": list(range(200))}).encode())
    # New documents, one with an attachment.
    status, rows = jrequest("POST", f"{db}/_bulk_docs", {"docs": [{"_id": f"doc-{i:03d}", "n": i} for i in range(40, 45)]})
    assert status == 201, rows
    put_attachment(db, "doc-040", rows[0]["rev"], "notes.txt", "text/plain", NOTES + b"more")
    # The conflict resolved: the losing branch deleted.
    status, row = jrequest("DELETE", f"{db}/doc-001?rev=2-" + "b" * 32)
    assert status == 200, row
    # A deletion of a document with an attachment.
    status, doc = jrequest("GET", f"{db}/doc-016")
    status, row = jrequest("DELETE", f"{db}/doc-016?rev={doc['_rev']}")
    assert status == 200, row


def snapshot(db):
    """Every document of `db`: all leaves with history and attachment bodies (JSON), in
    changes order, so a copy written in this order has the same changes order."""
    status, changes = jrequest("GET", f"{db}/_changes?style=all_docs")
    docs = []
    for row in changes["results"]:
        doc_id = urllib.parse.quote(row["id"], safe="/")
        status, leaves = jrequest("GET", f"{db}/{doc_id}?open_revs=all&revs=true&attachments=true")
        for leaf in leaves:
            if "ok" in leaf:
                docs.append(leaf["ok"])
    return docs


def replicate(base, source, target, proxy_side):
    """Runs CouchDB's replicator (one-shot) with one side reached through the proxy."""
    parts = urllib.parse.urlsplit(base)
    proxy = f"{parts.scheme}://{parts.username}:{parts.password}@127.0.0.1:{PROXY_PORT}"
    body = {"source": (proxy if proxy_side == "source" else base) + "/" + source,
            "target": (proxy if proxy_side == "target" else base) + "/" + target,
            "create_target": True}
    status, result = jrequest("POST", f"{base}/_replicate", body)
    assert status == 200 and result.get("ok"), result
    return result


def record(base, name, source, target, proxy_side):
    path = f"/tmp/lt-record-{name}.json"
    if os.path.exists(path):
        os.remove(path)
    proxy = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "record-exchanges.py"),
                              "--upstream", urllib.parse.urlunsplit(("http", f"127.0.0.1:{urllib.parse.urlsplit(base).port}", "", "", "")),
                              "--listen", str(PROXY_PORT), "--out", path])
    try:
        time.sleep(1)
        result = replicate(base, source, target, proxy_side)
        time.sleep(1)
    finally:
        proxy.terminate()
        proxy.wait()
    with open(path) as f:
        exchanges = json.load(f)["exchanges"]
    print(f"{name}: {len(exchanges)} exchanges, {result['history'][0]['docs_written']} documents written", file=sys.stderr)
    return exchanges


def main():
    base = couch_url()
    status, welcome = jrequest("GET", base + "/")
    for db in ("lt_fixture_src", "lt_fixture_pull", "lt_fixture_push"):
        jrequest("DELETE", f"{base}/{db}")
    jrequest("PUT", f"{base}/lt_fixture_src")
    src = f"{base}/lt_fixture_src"
    seed_first(src)
    seed1 = snapshot(src)
    pull1 = record(base, "pull-1", "lt_fixture_src", "lt_fixture_pull", "source")
    push1 = record(base, "push-1", "lt_fixture_src", "lt_fixture_push", "target")
    seed_second(src)
    seed2 = snapshot(src)
    pull2 = record(base, "pull-2", "lt_fixture_src", "lt_fixture_pull", "source")
    push2 = record(base, "push-2", "lt_fixture_src", "lt_fixture_push", "target")
    final = snapshot(f"{base}/lt_fixture_push")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({
            "recorded_with": {"couchdb": welcome["version"], "git_sha": welcome.get("git_sha"),
                              "script": "scripts/record-replicator-fixtures.py"},
            "source_db": "lt_fixture_src", "pull_target_db": "lt_fixture_pull", "push_target_db": "lt_fixture_push",
            "seeds": [seed1, seed2],
            "runs": [{"name": "pull-1", "side": "source", "seed": 0, "exchanges": pull1},
                     {"name": "push-1", "side": "target", "seed": 0, "exchanges": push1},
                     {"name": "pull-2", "side": "source", "seed": 1, "exchanges": pull2},
                     {"name": "push-2", "side": "target", "seed": 1, "exchanges": push2}],
            "push_target_final": final,
        }, f, indent=1, sort_keys=False)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
