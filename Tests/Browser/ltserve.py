"""`lt serve` as a child process on ephemeral ports, for the browser tests and the scripts'
benchmarks: started in its own temporary data directory, its ports read from what it announces.
"""

import base64
import json
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request


def request(method, url, body=None, auth=None):
    """One JSON request: its status and decoded body (`auth`: Basic credentials as a pair)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


class LTServer:
    def __init__(self, lt, admin, *extra, log_level="warning"):
        self.directory = tempfile.mkdtemp(prefix="lt-serve-")
        self.process = subprocess.Popen(
            [lt, "serve", "--data", self.directory, "--db-port", "0", "--port", "0", "--admin", f"{admin[0]}:{admin[1]}",
             "--log-level", log_level, "--tiles", "none", *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        wanted = {"database API"} if "--database-only" in extra else {"database API", "application API"}
        ports = {}
        while set(ports) != wanted:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("lt serve did not start")
            for name in wanted:
                if name in line:
                    ports[name] = int(line.rsplit(":", 1)[1])
        self.db_port = ports["database API"]
        self.app_port = ports.get("application API")
        self.db = f"http://127.0.0.1:{self.db_port}"
        self.app = f"http://127.0.0.1:{self.app_port}" if self.app_port else None

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)
