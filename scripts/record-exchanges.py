#!/usr/bin/env python3
"""Record the HTTP exchanges a CouchDB client (CouchDB's own replicator, PouchDB, ...) has with
a CouchDB server, for replay against lt (Tests/Compatibility/Fixtures, ReplicatorReplayTests).

A small reverse proxy: it listens on --listen, forwards every request to --upstream, and
appends each exchange (request and answer, in the order requests arrived) to --out as JSON.
Point the client at the proxy instead of the server:

    python3 scripts/record-exchanges.py --upstream http://127.0.0.1:5984 --listen 5990 --out pull.json &
    curl -X POST http://admin:pw@127.0.0.1:5984/_replicate -H 'Content-Type: application/json' \
      -d '{"source":"http://admin:pw@127.0.0.1:5990/src","target":"http://admin:pw@127.0.0.1:5984/dst"}'

Credentials are never written: `Authorization` and `Cookie` headers are dropped from the
recording, and so is the body of `POST /_session`. Bodies are kept as text when they are UTF-8, else as base64. Answers are forwarded
whole (a continuous feed would never end: record one-shot replications).
"""
import argparse
import base64
import http.client
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEPT_HEADERS = {"content-type", "accept", "content-encoding", "accept-encoding", "etag", "location",
                "cache-control", "transfer-encoding", "content-length", "x-couch-full-commit", "if-match",
                "destination"}


def body_record(data: bytes):
    if not data:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


class Recorder:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.next_id = 0
        self.exchanges = []

    def start(self):
        with self.lock:
            self.next_id += 1
            return self.next_id

    def add(self, exchange):
        with self.lock:
            self.exchanges.append(exchange)
            self.exchanges.sort(key=lambda e: e["seq"])
            with open(self.path, "w") as f:
                json.dump({"exchanges": self.exchanges}, f, indent=1)


def make_handler(upstream, recorder):
    target = urllib.parse.urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def read_body(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def forward(self):
            seq = recorder.start()
            body = self.read_body()
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "transfer-encoding", "connection", "keep-alive")}
            if body or self.command in ("POST", "PUT"):
                headers["Content-Length"] = str(len(body))
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=300)
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            self.send_response(answer.status, answer.reason)
            for key, value in answer.getheaders():
                if key.lower() in ("transfer-encoding", "content-length", "connection"):
                    continue
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            connection.close()
            recorder.add({
                "seq": seq,
                "method": self.command,
                "path": self.path,
                "request_headers": {k.lower(): v for k, v in self.headers.items() if k.lower() in KEPT_HEADERS},
                # A session login carries the password in its body: never recorded.
                "request_body": "(credentials withheld)" if self.path.startswith("/_session") else body_record(body),
                "status": answer.status,
                "response_headers": {k.lower(): v for k, v in answer.getheaders() if k.lower() in KEPT_HEADERS},
                "response_body": body_record(data),
            })

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_COPY = forward

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the server to forward to, e.g. http://127.0.0.1:5984")
    parser.add_argument("--listen", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("--out", required=True, help="JSON file the exchanges are written to")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.listen), make_handler(args.upstream, Recorder(args.out)))
    print(f"recording {args.upstream} on 127.0.0.1:{args.listen} into {args.out}", file=sys.stderr)
    server.serve_forever()


if __name__ == "__main__":
    main()
