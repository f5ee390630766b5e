#!/usr/bin/env python3
"""Real CouchDB clients from PyPI against a real `lt serve`.

IBM's current SDK (ibmcloudant), aiocouch, pycouchdb and CouchDB-Python, at the versions in
Tests/Compatibility/requirements.txt, each doing what an application does with CouchDB: CRUD,
authentication (basic, cookie, `_session`), attachments (binary, and gzip-compressible text
that the server keeps compressed), `_changes`, `_find` and `_index`, bulk APIs, replication
(`_replicate` and `_replicator` documents, `_scheduler`).

    python3 Tests/Compatibility/clients.py --lt .build/debug/lt          # starts its own server
    python3 Tests/Compatibility/clients.py --url http://admin:pw@127.0.0.1:5984   # any server

With --url it runs against any CouchDB-compatible server (the same suite against Apache CouchDB
gives the reference: docs/compatibility.md). Prints one line per test, exits 1 if any failed.
"""
import argparse
import asyncio
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import uuid

import requests

NOTES = ("Freeway Drive, Cupertino: 37.33, -122.03. " * 30).encode()
PHOTO = bytes(random.Random(7).randrange(256) for _ in range(4096))
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def check(condition, message="check failed"):
    if not condition:
        raise AssertionError(message)


class Server:
    """The server under test: its URL, admin credentials, and a plain HTTP session."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.user = urllib.parse.unquote(parts.username or "")
        self.password = urllib.parse.unquote(parts.password or "")
        self.base = f"{parts.scheme}://{parts.hostname}:{parts.port}"
        self.http = requests.Session()
        self.http.auth = (self.user, self.password)

    def url(self, with_credentials=False):
        if not with_credentials:
            return self.base
        return self.base.replace("://", f"://{urllib.parse.quote(self.user)}:{urllib.parse.quote(self.password)}@")

    def fresh_db(self, prefix):
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        return name

    def wait(self, predicate, timeout=30, what="condition"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")


# MARK: ibmcloudant (IBM's current SDK)

def cloudant(server, session=False):
    from ibm_cloud_sdk_core.authenticators import BasicAuthenticator
    from ibmcloudant.cloudant_v1 import CloudantV1
    from ibmcloudant.couchdb_session_authenticator import CouchDbSessionAuthenticator
    if session:
        authenticator = CouchDbSessionAuthenticator(server.user, server.password)
    else:
        authenticator = BasicAuthenticator(server.user, server.password)
    service = CloudantV1(authenticator=authenticator)
    service.set_service_url(server.base)
    return service


@test
def ibmcloudant_documents_and_attachments(server):
    for session in (False, True):
        service = cloudant(server, session=session)
        db = server.fresh_db("ibm")
        check(service.put_database(db=db).get_result()["ok"])
        check(service.get_server_information().get_result()["couchdb"] == "Welcome")
        created = service.post_document(db=db, document={"_id": "fix-1", "lat": 37.33, "lon": -122.03}).get_result()
        check(created["ok"] and created["rev"].startswith("1-"), created)
        doc = service.get_document(db=db, doc_id="fix-1").get_result()
        check(doc["lat"] == 37.33 and doc["_rev"] == created["rev"], doc)
        rev = service.put_attachment(db=db, doc_id="fix-1", attachment_name="notes.txt", attachment=NOTES,
                                     content_type="text/plain", rev=doc["_rev"]).get_result()["rev"]
        rev = service.put_attachment(db=db, doc_id="fix-1", attachment_name="photo.bin", attachment=PHOTO,
                                     content_type="application/octet-stream", rev=rev).get_result()["rev"]
        text = service.get_attachment(db=db, doc_id="fix-1", attachment_name="notes.txt").get_result().content
        check(text == NOTES, f"text attachment came back as {len(text)} bytes")
        binary = service.get_attachment(db=db, doc_id="fix-1", attachment_name="photo.bin").get_result().content
        check(binary == PHOTO, "binary attachment changed")
        stub = service.get_document(db=db, doc_id="fix-1").get_result()["_attachments"]["notes.txt"]
        # The SDK sends request bodies gzip-compressed: CouchDB then reports the compressed
        # size as `length`, lt the decoded one (docs/compatibility.md).
        check(stub["stub"] and stub["length"] > 0, stub)
        inline = service.get_document(db=db, doc_id="fix-1", attachments=True).get_result()["_attachments"]
        check(base64.b64decode(inline["notes.txt"]["data"]) == NOTES and base64.b64decode(inline["photo.bin"]["data"]) == PHOTO)
        deleted = service.delete_document(db=db, doc_id="fix-1", rev=rev).get_result()
        check(deleted["ok"], deleted)
        service.delete_database(db=db)


@test
def ibmcloudant_bulk_changes_find(server):
    from ibmcloudant.cloudant_v1 import BulkDocs, IndexDefinition, IndexField, BulkGetQueryDocument
    service = cloudant(server)
    db = server.fresh_db("ibm")
    service.put_database(db=db)
    docs = [{"_id": f"fix-{i:02d}", "user": "ann" if i % 2 else "bob", "ts": i} for i in range(20)]
    written = service.post_bulk_docs(db=db, bulk_docs=BulkDocs(docs=docs)).get_result()
    check(len(written) == 20 and all(row.get("ok") for row in written), written[:2])
    fetched = service.post_bulk_get(db=db, docs=[BulkGetQueryDocument(id="fix-03"), BulkGetQueryDocument(id="nope")]).get_result()
    check(fetched["results"][0]["docs"][0]["ok"]["ts"] == 3, fetched)
    check("error" in fetched["results"][1]["docs"][0], fetched)
    changes = service.post_changes(db=db, include_docs=True).get_result()
    check(len(changes["results"]) == 20 and changes["results"][0]["doc"]["_id"].startswith("fix-"), changes["last_seq"])
    later = service.post_changes(db=db, since=changes["last_seq"]).get_result()
    check(later["results"] == [], later)
    index = service.post_index(db=db, index=IndexDefinition(fields=[IndexField(ts="asc")]), name="by-ts", ddoc="idx", type="json").get_result()
    check(index["result"] in ("created", "exists"), index)
    found = service.post_find(db=db, selector={"user": "ann", "ts": {"$gt": 10}}, sort=[{"ts": "asc"}], fields=["_id", "ts"], limit=3).get_result()
    check([d["ts"] for d in found["docs"]] == [11, 13, 15], found)
    page = service.post_find(db=db, selector={"ts": {"$gte": 0}}, limit=5, bookmark=found.get("bookmark")).get_result()
    check("docs" in page)
    indexes = service.get_indexes_information(db=db).get_result()
    check(any(i["name"] == "by-ts" for i in indexes["indexes"]), indexes)
    all_docs = service.post_all_docs(db=db, include_docs=False, limit=5).get_result()
    check(all_docs["total_rows"] == 21 and len(all_docs["rows"]) == 5, all_docs)  # 20 + the index's design document
    service.delete_database(db=db)


@test
def ibmcloudant_replicator_and_scheduler(server):
    from ibmcloudant.cloudant_v1 import ReplicationDatabase, ReplicationDocument
    service = cloudant(server)
    source, target = server.fresh_db("ibm-src"), server.fresh_db("ibm-dst")
    service.put_database(db=source)
    for i in range(10):
        service.post_document(db=source, document={"_id": f"d{i}", "n": i})
    service.put_database(db="_replicator") if service.head_database(db="_replicator").get_status_code() != 200 else None
    doc = ReplicationDocument(id=f"rep-{uuid.uuid4().hex[:8]}",
                              source=ReplicationDatabase(url=f"{server.url(True)}/{source}"),
                              target=ReplicationDatabase(url=f"{server.url(True)}/{target}"),
                              create_target=True)
    service.put_replication_document(doc_id=doc.id, replication_document=doc)

    def completed():
        state = service.get_scheduler_document(doc_id=doc.id).get_result()
        return state if state.get("state") == "completed" else None
    state = server.wait(completed, what="the _replicator job to complete")
    check(server.password not in json.dumps(state), "the scheduler shows the password")
    check(state["info"]["docs_written"] == 10, state)
    check(service.get_database_information(db=target).get_result()["doc_count"] == 10)
    jobs = service.get_scheduler_docs().get_result()
    check(any(d["doc_id"] == doc.id for d in jobs["docs"]), jobs)
    check(server.password not in json.dumps(jobs), "the scheduler shows the password")
    service.delete_database(db=source)
    service.delete_database(db=target)


# MARK: aiocouch

@test
def aiocouch_documents_changes_find(server):
    async def run():
        from aiocouch import CouchDB, ConflictError, UnauthorizedError
        async with CouchDB(server.base, user=server.user, password=server.password) as couch:
            await couch.check_credentials()
            db = await couch.create(server.fresh_db("aio"))
            doc = await db.create("fix-1", data={"lat": 37.33, "lon": -122.03})
            await doc.save()
            check(doc.rev.startswith("1-"), doc.rev)
            doc["accuracy"] = 5
            await doc.save()
            check(doc.rev.startswith("2-"))
            stale = await db.get("fix-1", rev=None)
            stale["accuracy"] = 6
            await stale.save()
            doc["accuracy"] = 7
            try:
                await doc.save()
                raise AssertionError("a stale save was accepted")
            except ConflictError:
                pass
            attachment = stale.attachment("notes.txt")
            await attachment.save(NOTES, "text/plain")
            check(await stale.attachment("notes.txt").fetch() == NOTES, "text attachment changed")
            photo = stale.attachment("photo.bin")
            await photo.save(PHOTO, "application/octet-stream")
            check(await stale.attachment("photo.bin").fetch() == PHOTO, "binary attachment changed")
            async with db.create_docs() as bulk:
                for i in range(10):
                    bulk.create(f"bulk-{i}", data={"n": i})
            check(len([d async for d in db.akeys()]) == 11)
            await db.index({"fields": ["n"]}, name="by-n")
            found = [d async for d in db.find({"n": {"$gte": 7}})]
            check(sorted(d["n"] for d in found) == [7, 8, 9], [d.id for d in found])
            seen = []
            async for event in db.changes(since="0"):
                seen.append(event.id)
                if len(seen) >= 12:
                    break
            check("fix-1" in seen and "bulk-3" in seen, seen)
            await db.delete()
        async with CouchDB(server.base, user=server.user, password="wrong") as couch:
            try:
                await couch.check_credentials()
                raise AssertionError("wrong credentials were accepted")
            except UnauthorizedError:
                pass
    asyncio.run(run())


# MARK: pycouchdb

@test
def pycouchdb_documents_attachments_replication(server):
    import pycouchdb
    for method in ("basic", "session"):
        couch = pycouchdb.Server(server.url(True) + "/", authmethod=method)
        check("version" in couch.info())
        name = server.fresh_db("pyc")
        db = couch.create(name)
        doc = db.save({"_id": "fix-1", "lat": 37.33})
        check(db.get("fix-1")["lat"] == 37.33)
        doc = db.put_attachment(doc, NOTES, filename="notes.txt", content_type="text/plain")
        doc = db.put_attachment(doc, PHOTO, filename="photo.bin", content_type="application/octet-stream")
        check(db.get_attachment(doc, "notes.txt") == NOTES, "text attachment changed")
        check(db.get_attachment(doc, "photo.bin") == PHOTO, "binary attachment changed")
        saved = db.save_bulk([{"_id": f"d{i}", "n": i} for i in range(10)])
        check(len(saved) == 10 and all("_rev" in d for d in saved))
        last_seq, changes = db.changes_list()
        check(len(changes) == 11, len(changes))
        _, later = db.changes_list(since=last_seq)
        check(later == [], later)
        found = list(db.find({"n": {"$lt": 3}}))
        check(sorted(d["n"] for d in found) == [0, 1, 2], found)
        copy = server.fresh_db("pyc-copy")
        result = couch.replicate(f"{server.url(True)}/{name}", f"{server.url(True)}/{copy}", create_target=True)
        check(result.get("ok"), result)
        replica = couch.database(copy)
        check(replica.get_attachment(replica.get("fix-1"), "notes.txt") == NOTES, "attachment changed in replication")
        db.delete("d0")
        check(len(list(db.all(keys=["d1"]))) == 1)
        couch.delete(name)
        couch.delete(copy)


# MARK: CouchDB-Python

@test
def couchdb_python_session_replicate_conflicts(server):
    import couchdb
    couch = couchdb.Server(server.url(True) + "/")
    name = server.fresh_db("cpy")
    db = couch.create(name)
    doc_id, rev = db.save({"_id": "fix-1", "n": 1})
    db.put_attachment(db[doc_id], NOTES, "notes.txt", "text/plain")
    check(db.get_attachment(doc_id, "notes.txt").read() == NOTES)
    # A conflict made as a replicator makes one, then resolved.
    db.update([{"_id": "fix-1", "_rev": "2-" + "c" * 32, "n": 2, "_revisions": {"start": 2, "ids": ["c" * 32, rev.split("-")[1]]}}], new_edits=False)
    conflicted = db.get("fix-1", conflicts=True)
    check(len(conflicted.get("_conflicts", [])) == 1, conflicted)
    loser = conflicted["_conflicts"][0]
    db.delete({"_id": "fix-1", "_rev": loser})
    check("_conflicts" not in db.get("fix-1", conflicts=True), "the conflict is still there")
    copy = server.fresh_db("cpy-copy")
    result = couch.replicate(f"{server.url(True)}/{name}", f"{server.url(True)}/{copy}", create_target=True)
    check(result["ok"], result)
    check("_conflicts" not in couch[copy].get("fix-1", conflicts=True))
    # Cookie session.
    answer = requests.post(f"{server.base}/_session", data={"name": server.user, "password": server.password})
    check(answer.status_code == 200 and "AuthSession" in answer.cookies, answer.text)
    me = requests.get(f"{server.base}/_session", cookies=answer.cookies).json()
    check(me["userCtx"]["name"] == server.user, me)
    del couch[name]
    del couch[copy]


# MARK: Prometheus' own parser (prometheus-client), and CouchDB's statistics shapes

@test
def prometheus_client_parses_metrics(server):
    from prometheus_client.parser import text_string_to_metric_families
    check(requests.get(f"{server.base}/_node/_local/_prometheus").status_code == 401, "metrics are for admins")
    answer = server.http.get(f"{server.base}/_node/_local/_prometheus")
    check(answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/plain"), answer.headers)
    families = list(text_string_to_metric_families(answer.text))  # raises on any malformed line
    check(len(families) > 5, [f.name for f in families])
    for family in families:
        for sample in family.samples:
            check(sample.value >= 0 or family.type == "gauge", f"{sample}")
    # lt's request times are histograms. (CouchDB 3.4.3's are summaries, and most of its `# TYPE`
    # lines follow their `# HELP` text on the same line, so a parser sees those families untyped.)
    histograms = [f for f in families if f.type == "histogram"]
    check(histograms or not any(f.name.startswith("lt_") for f in families), "no histogram")
    for family in histograms:
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                check("le" in sample.labels, f"{sample}")
    stats = server.http.get(f"{server.base}/_node/_local/_stats").json()
    methods = stats["couchdb"]["httpd_request_methods"]
    check(methods["GET"]["type"] == "counter" and methods["GET"]["value"] > 0, methods)
    check(stats["couchdb"]["request_time"]["type"] == "histogram", stats["couchdb"]["request_time"])
    system = server.http.get(f"{server.base}/_node/_local/_system").json()
    check(system["uptime"] >= 0 and isinstance(system["memory"], dict), system)


def start_lt(binary):
    data = tempfile.mkdtemp(prefix="lt-clients-")
    log = open(os.path.join(data, "serve.log"), "w")
    password = uuid.uuid4().hex
    process = subprocess.Popen([binary, "serve", "--data", os.path.join(data, "db"), "--db-port", "0", "--port", "0",
                                "--admin", f"admin:{password}", "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        with open(os.path.join(data, "serve.log")) as f:
            for line in f:
                if "database API listening on " in line:
                    url = line.split("listening on ")[1].strip()
                    return process, url.replace("://", f"://admin:{password}@")
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    sys.exit("lt serve did not start: " + open(os.path.join(data, "serve.log")).read())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lt", help="the lt binary to start")
    parser.add_argument("--url", help="a running server with admin credentials")
    parser.add_argument("-k", help="run only tests whose name contains this")
    args = parser.parse_args()
    process = None
    if args.url:
        url = args.url
    elif args.lt:
        process, url = start_lt(args.lt)
    else:
        sys.exit("give --lt BINARY or --url URL")
    server = Server(url)
    failed = 0
    try:
        for fn in TESTS:
            if args.k and args.k not in fn.__name__:
                continue
            started = time.time()
            try:
                fn(server)
                print(f"ok     {fn.__name__} ({time.time() - started:.1f} s)")
            except Exception:
                failed += 1
                print(f"FAILED {fn.__name__}")
                traceback.print_exc()
    finally:
        if process:
            process.terminate()
            process.wait()
    print(f"{len(TESTS) - failed} of {len(TESTS)} client tests passed" if not args.k else f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
