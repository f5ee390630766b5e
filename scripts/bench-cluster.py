#!/usr/bin/env python3
"""Benchmark: consolidation lag and throughput, embedded and in cluster mode, in the same run.

Embedded: one `lt serve`. Cluster: a stand-in cluster (`lt serve --database-only`, which speaks
the CouchDB API) and a control plane (`lt serve --couchdb URL`) in front of it. For each, USERS
users register and log in through the application API, then WRITERS threads write RATE locations
a second for SECONDS seconds straight into users' databases with their API keys (as devices
replicate), and a reader follows `lt_locations_all`'s continuous changes feed on the same
database, timing each location from its write's acknowledgement until it is there.

Usage: scripts/bench-cluster.py --lt .build/release/lt [--users 200 --rate 100 --seconds 20]
"""

import argparse
import base64
import http.client
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Browser"))
from ltserve import LTServer  # noqa: E402

ADMIN = ("admin", "bench-admin-pw")


def auth(name, password):
    return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()


class Connection:
    def __init__(self, port):
        self.port = port
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method, path, body=None, authorization=None):
        headers = {"Content-Type": "application/json"}
        if authorization:
            headers["Authorization"] = authorization
        self.http.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = self.http.getresponse()
        data = response.read()
        return response.status, (json.loads(data) if data else None)


def run(mode, lt, options):
    servers = []
    try:
        if mode == "cluster":
            cluster = LTServer(lt, ADMIN, "--database-only", log_level="error")
            servers.append(cluster)
            db_port = cluster.db_port
            control = LTServer(lt, ADMIN, "--couchdb", f"http://{ADMIN[0]}:{ADMIN[1]}@127.0.0.1:{db_port}",
                               "--max-registrations-per-hour", "1000000000", log_level="error")
            servers.append(control)
        else:
            control = LTServer(lt, ADMIN, "--max-registrations-per-hour", "1000000000", log_level="error")
            servers.append(control)
            db_port = control.db_port
        app = Connection(control.app_port)
        keys = []
        begin = time.time()
        for i in range(options.users):
            status, _ = app.call("PUT", f"/api/users/user{i}", {"password": f"pw-{i}"})
            assert status == 201, status
        registration = (time.time() - begin) / options.users * 1000
        for i in range(options.users):
            status, login = app.call("POST", "/api/login", {"username": f"user{i}", "password": f"pw-{i}"})
            assert status == 200, login
            keys.append((f"user{i}", auth(login["api_key"], login["api_password"])))

        written = {}
        seen = {}
        lock = threading.Lock()
        stop = threading.Event()

        def follow():
            feed = http.client.HTTPConnection("127.0.0.1", db_port, timeout=120)
            feed.request("GET", "/lt_locations_all/_changes?feed=continuous&since=now&heartbeat=1000", headers={"Authorization": auth(*ADMIN)})
            response = feed.getresponse()
            while not stop.is_set():
                line = response.readline()
                if not line.strip():
                    continue
                row = json.loads(line)
                now = time.time()
                with lock:
                    # Copies are kept as <user>:<id>; arrival compared with the write's acknowledgement at the end.
                    seen.setdefault(str(row.get("id")).split(":", 1)[-1], now)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        time.sleep(0.5)
        per_writer = options.rate / options.writers

        def write(w):
            connection = Connection(db_port)
            rng = random.Random(w)
            n = 0
            start_time = time.time()
            while time.time() - start_time < options.seconds:
                due = start_time + n / per_writer
                if due > time.time():
                    time.sleep(due - time.time())
                user, authorization = keys[rng.randrange(len(keys))]
                doc_id = f"w{w}-{n}"
                doc = {"type": "Feature", "created_at": int(time.time() * 1000),
                       "geometry": {"type": "Point", "coordinates": [rng.uniform(-122.5, -122), rng.uniform(37, 38)]},
                       "properties": {"username": user}}
                status, _ = connection.call("PUT", f"/lt_locations_user_{user}/{doc_id}", doc, authorization)
                if status == 201:
                    with lock:
                        written[doc_id] = time.time()
                n += 1

        threads = [threading.Thread(target=write, args=(w,)) for w in range(options.writers)]
        begin = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        achieved = len(written) / (time.time() - begin)
        deadline = time.time() + 60
        while time.time() < deadline:
            with lock:
                if all(doc_id in seen for doc_id in written):
                    break
            time.sleep(0.1)
        stop.set()
        with lock:
            # A copy can arrive before its write's acknowledgement reached the writer: lag 0 then.
            lags = sorted(max(0.0, seen[doc_id] - acked) for doc_id, acked in written.items() if doc_id in seen)
            missing = sum(1 for doc_id in written if doc_id not in seen)
        pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))] * 1000 if lags else float("nan")
        return {"registration_ms": registration, "writes_per_s": achieved, "written": len(written), "missing": missing,
                "p50": pick(0.5), "p99": pick(0.99), "max": (lags[-1] * 1000 if lags else float("nan"))}
    finally:
        for server in reversed(servers):
            server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--writers", type=int, default=8)
    options = parser.parse_args()
    print(f"bench-cluster: {options.users} users, {options.rate:g} writes/s by {options.writers} writers for {options.seconds:g} s, "
          f"lag until in lt_locations_all")
    results = {mode: run(mode, options.lt, options) for mode in ("embedded", "cluster")}
    print(f"{'':44}{'embedded':>12}{'cluster':>12}")
    for key, label, unit in [("registration_ms", "registration (PBKDF2 included)", "ms"), ("writes_per_s", "writes achieved", "/s"),
                             ("p50", "lag p50", "ms"), ("p99", "lag p99", "ms"), ("max", "lag max", "ms"),
                             ("missing", "not consolidated after 60 s", "")]:
        print(f"{label + (' (' + unit + ')' if unit else ''):44}{results['embedded'][key]:12.1f}{results['cluster'][key]:12.1f}")


if __name__ == "__main__":
    main()
