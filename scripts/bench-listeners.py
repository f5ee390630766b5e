#!/usr/bin/env python3
"""Benchmark: what filtered changes listeners cost the server (issue 22, item 6).

A fresh `lt serve`; N listeners hold filtered continuous `_changes` feeds open (each a real
socket), while one writer PUTs documents at a steady rate for a while. Measured from the
server process's own /proc figures: CPU seconds per commit with the listeners, against the
same writer with no listeners in the same run (the baseline), and resident memory before the
listeners, with them, and after they have gone (after a pause, so that the allocator has had
its chance to give memory back). CPU counts the server and its child processes (the
JavaScript query servers). Every listener must receive every matching document.

Usage: scripts/bench-listeners.py --lt .build/release/lt [--listeners 1000] [--rate 500]
       [--seconds 20] [--filter js|doc_ids|design]
"""

import argparse
import asyncio
import base64
import json
import os
import sys
import threading
import time
import http.client
import subprocess

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from couch_peer import rss_mib  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Browser"))
from ltserve import LTServer  # noqa: E402

ADMIN = ("admin", "bench-admin-pw")
AUTH = "Basic " + base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """CPU seconds of the server and its child processes (JavaScript query servers)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def request(port, method, path, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request(method, path, body=None if body is None else json.dumps(body),
                       headers={"Authorization": AUTH, "Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def writer(port, rate, seconds, prefix, counter):
    """PUTs documents at `rate` a second for `seconds` on one keep-alive connection; every
    fourth one matches the listeners' filter."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        due = start + n / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = json.dumps({"type": "location", "user": "u%d" % (n % 4), "n": n, "geometry": {"type": "Point", "coordinates": [-122.3, 37.5]}})
        connection.request("PUT", f"/bench/{prefix}-{n}", body=body, headers={"Authorization": AUTH, "Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"write answered {response.status}")
        n += 1
    counter["writes"] = n
    connection.close()


async def listener(port, path, stop, seen):
    reader, writer_ = await asyncio.open_connection("127.0.0.1", port)
    writer_.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {AUTH}\r\n\r\n".encode())
    await writer_.drain()
    buffer = b""
    try:
        while not stop.is_set():
            try:
                chunk = await asyncio.wait_for(reader.read(65536), timeout=0.5)
            except asyncio.TimeoutError:
                continue
            if not chunk:
                break
            buffer += chunk
            if b"\n" in buffer:
                complete, buffer = buffer.rsplit(b"\n", 1)
                seen[0] += complete.count(b'"seq"')
    finally:
        writer_.close()


def run_phase(server, pid, listeners, rate, seconds, path, prefix):
    """Writes for `seconds` with `listeners` feeds open; returns (cpu per commit, writes,
    documents the listeners received, RSS with listeners)."""
    stop = threading.Event()
    seen = [0]
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def main():
        tasks = [asyncio.ensure_future(listener(server.db_port, path, stop, seen)) for _ in range(listeners)]
        await asyncio.sleep(1.5)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)  # the last documents reach every listener
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()))
    thread.start()
    ready.wait()
    counter = {}
    before = cpu_seconds(pid)
    writer(server.db_port, rate, seconds, prefix, counter)
    time.sleep(2)
    used = cpu_seconds(pid) - before
    rss = rss_mib(pid)
    stop.set()
    thread.join()
    return used / max(1, counter["writes"]), counter["writes"], seen[0], rss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    parser.add_argument("--listeners", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--filter", choices=["js", "doc_ids", "design"], default="js")
    options = parser.parse_args()
    extra = []
    # Builds with a per-address connection limit need it raised for this many listeners.
    if b"max-connections-per-address" in subprocess.run([options.lt, "serve", "--help"], capture_output=True).stdout:
        extra = ["--max-connections-per-address", str(options.listeners + 64)]
    server = LTServer(options.lt, ADMIN, *extra)
    pid = server.process.pid
    try:
        request(server.db_port, "PUT", "/bench")
        request(server.db_port, "PUT", "/bench/_design/app", {
            "filters": {"mine": "function (doc, req) { return doc.user === req.query.user; }"}})
        paths = {
            "js": "/bench/_changes?feed=continuous&since=now&heartbeat=10000&filter=app/mine&user=u1",
            "doc_ids": "/bench/_changes?feed=continuous&since=now&heartbeat=10000&filter=_doc_ids&doc_ids=%5B%22none%22%5D",
            "design": "/bench/_changes?feed=continuous&since=now&heartbeat=10000&filter=_design",
        }
        path = paths[options.filter]
        time.sleep(1)
        rss_start = rss_mib(pid)
        base_cpu, base_writes, _, _ = run_phase(server, pid, 0, options.rate, options.seconds, path, "base")
        cpu, writes, seen, rss_with = run_phase(server, pid, options.listeners, options.rate, options.seconds, path, "load")
        time.sleep(15)
        rss_after = rss_mib(pid)
        matching = (writes + 2) // 4 if options.filter == "js" else 0  # n % 4 == 1: user u1
        print(f"listeners: {options.listeners} ({options.filter} filter), writer {options.rate:.0f}/s for {options.seconds:.0f} s")
        print(f"  CPU per commit: {cpu * 1e3:.3f} ms with listeners, {base_cpu * 1e3:.3f} ms without "
              f"({cpu / base_cpu:.1f}x; {(cpu - base_cpu) / max(1, options.listeners) * 1e6:.2f} us per listener per commit)")
        print(f"  writes: {writes} (baseline {base_writes}); documents received by listeners: {seen} (expected {matching * options.listeners})")
        print(f"  RSS: {rss_start:.0f} MiB before, {rss_with:.0f} MiB with listeners, {rss_after:.0f} MiB 15 s after they went")
        print(json.dumps({"listeners": options.listeners, "filter": options.filter, "rate": options.rate, "cpu_ms_per_commit": cpu * 1e3,
                          "baseline_cpu_ms_per_commit": base_cpu * 1e3, "writes": writes, "received": seen,
                          "expected": matching * options.listeners, "rss_before": rss_start, "rss_with": rss_with, "rss_after": rss_after}))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
