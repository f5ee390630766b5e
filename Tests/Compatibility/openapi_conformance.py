"""The application API against its own OpenAPI document, with schemathesis (PyPI): a real
`lt serve`, every operation of /api/openapi.json (the same document as docs/openapi.yaml, which
the Swift tests keep equal) called with generated valid and invalid
requests (as an admin), each answer checked against the document: status codes, content types,
bodies, headers (405 with Allow), no 5xx. Exits non-zero on any failure.

    python3 Tests/Compatibility/openapi_conformance.py --lt .build/debug/lt [--examples 25]
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Browser"))
from ltserve import LTServer  # noqa: E402

ADMIN = ("admin", "conformance-pw")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    parser.add_argument("--examples", type=int, default=25)
    parser.add_argument("--seed", default="20261125")
    options = parser.parse_args()
    # Requests come "from" many addresses (schemathesis_hooks.py): the server believes the
    # X-Forwarded-For of loopback, so no generated request waits for another's failed login.
    server = LTServer(options.lt, ADMIN, "--trusted-proxy", "127.0.0.1/32")
    try:
        config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemathesis.toml")
        command = ["schemathesis", "--config-file", config, "run", f"{server.app}/api/openapi.json", "--url", server.app,
                   "--max-examples", str(options.examples), "--seed", options.seed,
                   "--auth", f"{ADMIN[0]}:{ADMIN[1]}", "--workers", "1", "--no-color"]
        print("openapi conformance:", " ".join(command[:6]), "...", flush=True)
        # In a directory of its own: schemathesis and hypothesis keep caches where they run.
        here = os.path.dirname(os.path.abspath(__file__))
        environment = dict(os.environ, SCHEMATHESIS_HOOKS="schemathesis_hooks",
                           PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
        with tempfile.TemporaryDirectory(prefix="lt-schemathesis-") as work:
            result = subprocess.run(command, cwd=work, env=environment)
        print(f"openapi conformance: {'1 passed, 0 failed' if result.returncode == 0 else '0 passed, 1 failed'}")
        return result.returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
