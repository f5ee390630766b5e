#!/usr/bin/env python3
"""Record how Apache CouchDB answers requests it cannot serve, for Tests/Compatibility.

Needs a running CouchDB (LT_TEST_COUCHDB_URL=http://admin:pw@127.0.0.1:5984; see
docs/compatibility.md). Makes a database `errors` with one document and one design document,
then sends the requests below (paths no route serves, known paths with a method they do not
take, malformed ids and parameters) as a server admin, and writes
Tests/Compatibility/Fixtures/couchdb-error-answers.json: each request with CouchDB's status and
its `error` and `reason`. `ErrorAnswerReplayTests` sends the same requests to lt and expects
the same status and `error` (and the same `reason` where the fixture says it must match).

With --compare URL, sends them to that server too (an `lt serve`, say) and prints every answer
that differs, instead of writing the fixture.
"""
import json
import os
import sys
import urllib.error
import urllib.request
from couch_peer import base_and_auth, couch_url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Tests", "Compatibility", "Fixtures", "couchdb-error-answers.json")
DB = "errors"

SETUP = [
    ("PUT", f"/{DB}", None),
    ("PUT", f"/{DB}/doc", '{"a":1}'),
    ("PUT", f"/{DB}/_design/d", '{"views":{"v":{"map":"function(doc){emit(doc._id,1)}"}}}'),
]

# (method, path, body): answers CouchDB gives with an error status.
REQUESTS = [
    ("GET", "/_nonexistent", None),
    ("GET", "/_config", None),
    ("POST", "/_uuids", None),
    ("DELETE", "/_all_dbs", None),
    ("PUT", "/_up", None),
    ("PUT", "/_active_tasks", None),
    ("POST", "/_dbs_info", "{}"),
    ("DELETE", "/_session", None),
    ("PUT", "/_session", "{}"),
    ("PROPFIND", f"/{DB}", None),
    ("PATCH", f"/{DB}", None),
    ("GET", "/no_such_db", None),
    ("GET", "/no_such_db/doc", None),
    ("GET", "/no_such_db/_all_docs", None),
    ("GET", "/no_such_db/_design/d/_view/v", None),
    ("GET", "/Bad_Name", None),
    ("PUT", "/Bad_Name", None),
    ("PUT", "/_bad", None),
    ("GET", f"/{DB}/missing", None),
    ("GET", f"/{DB}/doc?rev=1-abc", None),
    ("GET", f"/{DB}/doc?rev=nonsense", None),
    ("GET", f"/{DB}/doc?open_revs=nonsense", None),
    ("PATCH", f"/{DB}/doc", None),
    ("PUT", f"/{DB}/doc", '{"a":2}'),
    ("PUT", f"/{DB}/doc2", "not json"),
    ("PUT", f"/{DB}/doc2", "[1,2]"),
    ("PUT", f"/{DB}/_bad_id", "{}"),
    ("POST", f"/{DB}", "[]"),
    ("DELETE", f"/{DB}/doc", None),
    ("DELETE", f"/{DB}/doc?rev=1-abc", None),
    ("GET", f"/{DB}/doc/att", None),
    ("GET", f"/{DB}/_design/d/_view", None),
    ("GET", f"/{DB}/_design/d/_view/nope", None),
    ("GET", f"/{DB}/_design/nope/_view/v", None),
    ("GET", f"/{DB}/_design/d/_nothing", None),
    ("GET", f"/{DB}/_design/d/_show/nope", None),
    ("GET", f"/{DB}/_design/d/_list/nope/v", None),
    ("POST", f"/{DB}/_design/d/_update/nope", "{}"),
    ("GET", f"/{DB}/_design/d/_info/x", None),
    ("GET", f"/{DB}/_all_docs?limit=x", None),
    ("GET", f"/{DB}/_all_docs?limit=-1", None),
    ("GET", f"/{DB}/_all_docs?startkey=nonsense", None),
    ("GET", f"/{DB}/_all_docs?descending=maybe", None),
    ("POST", f"/{DB}/_all_docs", '{"keys":"x"}'),
    ("PUT", f"/{DB}/_all_docs", None),
    ("GET", f"/{DB}/_bulk_docs", None),
    ("POST", f"/{DB}/_bulk_docs", "{}"),
    ("POST", f"/{DB}/_bulk_docs", '{"docs":"x"}'),
    ("GET", f"/{DB}/_bulk_get", None),
    ("POST", f"/{DB}/_bulk_get", "{}"),
    ("GET", f"/{DB}/_revs_diff", None),
    ("POST", f"/{DB}/_revs_diff", "[]"),
    ("GET", f"/{DB}/_changes?feed=nonsense", None),
    ("GET", f"/{DB}/_changes?since=nonsense", None),
    ("GET", f"/{DB}/_changes?limit=x", None),
    ("GET", f"/{DB}/_changes?filter=nope", None),
    ("GET", f"/{DB}/_changes?filter=d/nope", None),
    ("PUT", f"/{DB}/_changes", None),
    ("GET", f"/{DB}/_find", None),
    ("POST", f"/{DB}/_find", "{}"),
    ("POST", f"/{DB}/_find", '{"selector":"x"}'),
    ("POST", f"/{DB}/_find", '{"selector":{"a":{"$nope":1}}}'),
    ("POST", f"/{DB}/_find", '{"selector":{},"limit":"x"}'),
    ("POST", f"/{DB}/_index", "{}"),
    ("DELETE", f"/{DB}/_index/_design/nope/json/nope", None),
    ("PUT", f"/{DB}/_security", "[]"),
    ("PUT", f"/{DB}/_revs_limit", '"x"'),
    ("PUT", f"/{DB}/_revs_limit", "0"),
    ("GET", f"/{DB}/_purge", None),
    ("POST", f"/{DB}/_purge", "[]"),
    ("GET", f"/{DB}/_compact", None),
    ("POST", f"/{DB}/_compact/nope", "{}"),
    ("GET", f"/{DB}/_local", None),
    ("GET", f"/{DB}/_local/nope", None),
    ("GET", f"/{DB}/_design", None),
    ("GET", f"/{DB}/_partition/p", None),
    ("GET", f"/{DB}/_design/d/_geo/nope", None),
    ("POST", "/_replicate", "{}"),
    ("POST", "/_replicate", '{"source":"nope","target":"nope2"}'),
    ("GET", "/_scheduler/nope", None),
]



class Client:
    def __init__(self, base):
        self.base, self.auth = base_and_auth(base)

    def send(self, method, path, body=None):
        data = body.encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", self.auth)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req) as res:
                status, raw = res.status, res.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "error" in answer:
            answer = {"error": answer["error"], "reason": answer.get("reason")}
        elif status < 400:
            answer = None  # a success: only the status is compared
        return status, answer

    def answers(self):
        self.send("DELETE", f"/{DB}")
        for method, path, body in SETUP:
            status, _ = self.send(method, path, body)
            if status >= 300:
                sys.exit(f"setup {method} {path} failed: {status}")
        out = []
        for method, path, body in REQUESTS:
            status, answer = self.send(method, path, body)
            step = {"method": method, "path": path, "status": status, "answer": answer}
            if body is not None:
                step["body"] = body
            out.append(step)
        self.send("DELETE", f"/{DB}")
        return out


def main():
    couch = Client(couch_url()).answers()
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        other = Client(sys.argv[2]).answers()
        differ = 0
        for a, b in zip(couch, other):
            if (a["status"], a["answer"]) != (b["status"], b["answer"]):
                differ += 1
                print(f"{a['method']} {a['path']}\n  CouchDB {a['status']} {a['answer']}\n  other   {b['status']} {b['answer']}")
        print(f"{differ} of {len(couch)} differ")
        return
    with open(OUT, "w") as f:
        json.dump({"couchdb": "3.4.3", "database": DB, "setup": [list(s) for s in SETUP], "steps": couch}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(couch)} answers to {OUT}")


main()
