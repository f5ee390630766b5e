#!/usr/bin/env python3
"""Record the revision ids Apache CouchDB gives to a series of edits, for Tests/Compatibility.

Needs a running CouchDB (LT_TEST_COUCHDB_URL=http://admin:pw@127.0.0.1:5984; see
docs/compatibility.md). Sends the requests below, as written (raw bodies, so number spellings
such as `2.0` and `1e3` reach the server as typed), to a fresh database `revids` and writes
Tests/Compatibility/Fixtures/couchdb-revision-ids.json: each request with CouchDB's status and
the revision id it answered. `RevisionIDReplayTests` sends the same requests to lt and expects
the same ids: CouchDB hashes a new revision from its content, so the same edit gets the same id
on every server that follows its formula.
"""
import base64
import json
import os
import sys
import urllib.error
import urllib.request
from couch_peer import base_and_auth, couch_url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Tests", "Compatibility", "Fixtures", "couchdb-revision-ids.json")
DB = "revids"

TEXT = ("Meeting notes.\n" * 40).encode()
PNG = bytes(range(256)) * 3


def b64(data):
    return base64.b64encode(data).decode()



class Recorder:
    def __init__(self, base):
        self.base, self.auth = base_and_auth(base)
        self.steps = []
        self.revs = {}

    def send(self, method, path, body=None, content_type="application/json", record=True):
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", self.auth)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req) as res:
                status, answer = res.status, json.loads(res.read())
        except urllib.error.HTTPError as error:
            status, answer = error.code, json.loads(error.read())
        if record:
            step = {"method": method, "path": path, "status": status, "answer": answer}
            if data is not None:
                step["content_type"] = content_type
                if isinstance(body, str):
                    step["body"] = body
                else:
                    step["body_base64"] = b64(body)
            self.steps.append(step)
        return answer


def main():
    r = Recorder(couch_url())
    r.send("DELETE", f"/{DB}", record=False)
    r.send("PUT", f"/{DB}", record=False)
    version = r.send("GET", "/", record=False)["version"]
    p = f"/{DB}"

    a1 = r.send("PUT", f"{p}/a", '{"x":1}')["rev"]
    a2 = r.send("PUT", f"{p}/a", '{"_rev":"%s","x":2,' % a1 + '''"nested":{"k":[1,2,3]},"f":1.5,"neg":-7,
        "big":5000000000,"nbig":-5000000000,"s":"h\\u00e9llo \u2603","n":null,"t":true,"fa":false,
        "e":{},"ea":[],"mixed":[1,"a",300,2.0],"exp":1e3,"zero":0,"negf":-0.25,"m32":-2147483648}''')["rev"]
    r.send("DELETE", f"{p}/a?rev={a2}")
    r.send("PUT", f"{p}/a", '{"y":1}')
    r.send("POST", p, '{"_id":"b","v":[256,0,255],"order":{"z":1,"a":2}}')
    r.send("POST", f"{p}/_bulk_docs", '{"docs":[{"_id":"d1","a":1},{"_id":"d2","float":0.1,"list":[[],[{}]]}]}')
    r.send("POST", f"{p}/_bulk_docs", '{"docs":[{"_id":"doc","a":2}]}')
    r.send("PUT", f"{p}/_design/x", '{"views":{"by_x":{"map":"function(doc){ emit(doc.x, null); }"}},"language":"javascript"}')

    c1 = r.send("PUT", f"{p}/c", json.dumps({
        "kind": "with attachments",
        "_attachments": {
            "notes.txt": {"content_type": "text/plain", "data": b64(TEXT)},
            "image.png": {"content_type": "image/png", "data": b64(PNG)},
        },
    }))["rev"]
    c2 = r.send("PUT", f"{p}/c/extra.bin?rev={c1}", PNG[:100], content_type="application/octet-stream")["rev"]
    c3 = r.send("PUT", f"{p}/c/notes.txt?rev={c2}", TEXT + b"more\n", content_type="text/plain")["rev"]
    r.send("DELETE", f"{p}/c/extra.bin?rev={c3}")
    doc = r.send("GET", f"{p}/c", record=False)
    doc["kind"] = "edited with stubs"
    c5 = r.send("PUT", f"{p}/c", json.dumps(doc))["rev"]
    r.send("POST", f"{p}/_bulk_docs", json.dumps({"docs": [{"_id": "c", "_rev": c5, "_deleted": True, "keep": 1}]}))
    r.send("PUT", f"{p}/e", json.dumps({"_attachments": {"a.json": {"content_type": "application/json", "data": b64(b'{"k": 1}')}}}))

    with open(OUT, "w") as f:
        json.dump({"couchdb": version, "database": DB, "steps": r.steps}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(r.steps)} requests recorded from CouchDB {version} into {OUT}")


if __name__ == "__main__":
    main()
