"""A page that loads PouchDB from a release's `dist/`, served on an ephemeral loopback port, for
the PouchDB browser test and benchmark (PouchDB itself is fetched beside the project, never
committed: docs/compatibility.md).
"""

import functools
import http.server
import os
import shutil
import tempfile
import threading


class PouchPage:
    def __init__(self, dist, files, html):
        self.site = tempfile.mkdtemp(prefix="lt-pouch-page-")
        for name in files:
            shutil.copy(os.path.join(dist, name), self.site)
        with open(os.path.join(self.site, "index.html"), "w") as f:
            f.write(html)

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=self.site))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = self.origin + "/index.html"

    def stop(self):
        self.server.shutdown()
        shutil.rmtree(self.site, ignore_errors=True)
