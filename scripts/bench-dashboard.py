#!/usr/bin/env python3
"""Benchmark: the dashboard's all-locations view over many locations, in headless Chromium.

Loads N locations (random-walk tracks around 40 cities, one fix a minute, as devices record
them) into lt_locations_all of a fresh `lt serve`, builds the geo index once (timed), then opens
/dashboard/#analysis signed in as an admin with the browser cache disabled and measures the time
from navigation to the first map drawn (the default, world view) and to the view fitted to the
data, and the bytes transferred until then (every response, as Chromium counts them). Baseline
in the same run: the same page's map request alone (the grid over the world), timed with curl-like
urllib from this script.

Usage: scripts/bench-dashboard.py --lt .build/release/lt [--locations 1000000]
"""

import argparse
import base64
import json
import math
import os
import random
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Browser"))
from cdp import Browser  # noqa: E402
from ltserve import LTServer  # noqa: E402

ADMIN = ("admin", "bench-admin-pw")
AUTH = "Basic " + base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", "Authorization": AUTH})
    with urllib.request.urlopen(req, timeout=600) as response:
        return json.loads(response.read() or b"null")


def tracks(count, seed=7):
    rng = random.Random(seed)
    cities = [(rng.uniform(-180, 180), rng.uniform(-60, 60)) for _ in range(40)]
    made, track = 0, 0
    while made < count:
        lon0, lat0 = cities[track % len(cities)]
        lat, lon = lat0 + rng.uniform(-0.15, 0.15), lon0 + rng.uniform(-0.15, 0.15)
        heading = rng.uniform(0, 2 * math.pi)
        t = 1_700_000_000_000 + track * 3_600_000
        for fix in range(min(1000, count - made)):
            heading += rng.uniform(-0.3, 0.3)
            step = rng.uniform(10, 40)
            lat = max(-89.9, min(89.9, lat + step * math.cos(heading) / 111_195))
            lon += step * math.sin(heading) / (111_195 * math.cos(math.radians(lat)))
            lon = (lon + 540) % 360 - 180
            t += 60_000
            yield {"_id": f"trk{track:05d}-{fix:04d}", "type": "Feature", "created_at": t,
                   "geometry": {"type": "Point", "coordinates": [round(lon, 7), round(lat, 7)]},
                   "properties": {"username": f"user{track % 500}", "timestamp": t, "background": False}}
            made += 1
        track += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    parser.add_argument("--locations", type=int, default=1_000_000)
    options = parser.parse_args()
    server = LTServer(options.lt, ADMIN, "--durability", "normal", log_level="error")
    db, app = server.db, server.app
    browser = None
    try:
        print(f"bench-dashboard: {options.locations:,} locations in lt_locations_all")
        start = time.time()
        batch = []
        for doc in tracks(options.locations):
            batch.append(doc)
            if len(batch) == 10_000:
                call("POST", f"{db}/lt_locations_all/_bulk_docs", {"docs": batch})
                batch = []
        if batch:
            call("POST", f"{db}/lt_locations_all/_bulk_docs", {"docs": batch})
        print(f"load (HTTP _bulk_docs, 10,000 per request)        {options.locations / (time.time() - start):12,.0f} docs/s")
        start = time.time()
        world = f"{app}/api/analysis/map?bbox=-180,-90,180,90&columns=13&rows=10&points=500"
        first = call("GET", world)
        print(f"geo index build (first map request)              {time.time() - start:12.1f} s   ({first['total']:,} counted)")
        timings = []
        for _ in range(20):
            start = time.time()
            body = urllib.request.urlopen(urllib.request.Request(world, headers={"Authorization": AUTH})).read()
            timings.append(time.time() - start)
        timings.sort()
        print(f"map request over the world (baseline), median    {timings[10] * 1000:12.1f} ms   ({len(body):,} bytes)")

        browser = Browser()
        browser.call("Network.setCacheDisabled", cacheDisabled=True)
        browser.navigate(f"{app}/dashboard/")
        browser.evaluate(f"fetch('/api/session', {{method: 'POST', headers: {{'Content-Type': 'application/json'}}, body: JSON.stringify({{username: '{ADMIN[0]}', password: '{ADMIN[1]}'}})}}).then(r => r.status)")
        results = []
        for run in range(5):
            browser.navigate("about:blank")
            received = 0
            begin = time.time()
            browser.call("Page.navigate", url=f"{app}/dashboard/#analysis")
            first_render = settled = None
            deadline = time.time() + 60
            while time.time() < deadline and settled is None:
                browser.socket.settimeout(0.02)
                try:
                    while True:
                        message = json.loads(browser.socket.recv())
                        if message.get("method") == "Network.loadingFinished":
                            received += message["params"].get("encodedDataLength", 0)
                except Exception:
                    pass
                browser.socket.settimeout(60)
                state = browser.evaluate("window.lt && window.lt.grid ? [window.lt.grid.total, window.lt.fitted, document.querySelectorAll('.cluster').length] : null")
                if state and state[2] > 0 and first_render is None:
                    first_render = (time.time() - begin, received)
                if state and state[1] and state[2] > 0 and first_render is not None and time.time() - begin > first_render[0] + 0.3:
                    settled = (time.time() - begin, received)
            results.append((first_render, settled))
        firsts = sorted(r[0][0] for r in results if r[0])
        bytes_first = sorted(r[0][1] for r in results if r[0])
        settles = sorted(r[1][0] for r in results if r[1])
        print(f"first render of the all-locations view, median   {firsts[len(firsts) // 2] * 1000:12.0f} ms   (target < 2,000 ms)")
        print(f"bytes transferred until then, median             {bytes_first[len(bytes_first) // 2]:12,} bytes (target < 2,000,000)")
        print(f"view fitted to the data and redrawn, median      {settles[len(settles) // 2] * 1000:12.0f} ms")
    finally:
        if browser:
            browser.close()
        server.stop()


if __name__ == "__main__":
    main()
