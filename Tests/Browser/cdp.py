"""A small Chrome DevTools Protocol driver for the dashboard's browser tests.

Starts Debian's headless Chromium with its own profile, attaches to a page over the DevTools
WebSocket (websocket-client from PyPI) and offers what the tests need: navigate, evaluate,
wait for a condition, screenshots, and every console error, uncaught exception and failed
request the page produced.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, width=1280, height=800):
        binary = find_chromium()
        if binary is None:
            raise RuntimeError("no Chromium: install Debian's chromium (scripts/install-deps.sh --for-tests)")
        self.profile = tempfile.mkdtemp(prefix="lt-chromium-")
        args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.time() > deadline or self.process.poll() is not None:
                raise RuntimeError("Chromium did not start")
            time.sleep(0.05)
        port = int(open(port_file).read().split()[0])
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(p for p in pages if p.get("type") == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.errors = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def close(self):
        try:
            self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)

    def _event(self, message):
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.errors.append(f"console.{params['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append("exception: " + details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")
        elif method == "Page.javascriptDialogOpening":
            self.call("Page.handleJavaScriptDialog", accept=True, wait=False)

    def call(self, method, wait=True, **params):
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        if not wait:
            return None
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message)

    def pump(self, seconds=0.05):
        """Reads the events that arrived meanwhile (console errors, dialogs)."""
        self.socket.settimeout(seconds)
        try:
            while True:
                self._event(json.loads(self.socket.recv()))
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self.socket.settimeout(60)

    def navigate(self, url):
        self.call("Page.navigate", url=url)
        self.wait("document.readyState === 'complete'")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result.get("result", {}).get("value")

    def wait(self, expression, timeout=20, what=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if self.evaluate(f"Boolean({expression})"):
                    return
            except RuntimeError:
                pass
            self.pump(0.1)
        raise AssertionError(f"timed out waiting for {what or expression}")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))

    def set_viewport(self, width, height, mobile=False):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=mobile)


def axe_source():
    """axe-core, Deque's accessibility rules engine (MPL-2.0), as PyPI's axe-playwright-python ships
    it (scripts/install-deps.sh --for-tests installs it); None without it."""
    try:
        import axe_playwright_python
    except ImportError:
        return None
    with open(os.path.join(os.path.dirname(axe_playwright_python.__file__), "axe.min.js")) as script:
        return script.read()


# What a scan reports: each violated rule with its impact and the first element that breaks it.
AXE_RUN = """axe.run(document, { resultTypes: ['violations'] }).then((result) => result.violations.map((v) =>
    `${v.id} (${v.impact}, ${v.nodes.length}×, e.g. ${v.nodes[0].target.join(' ')}): ${v.help}`))"""


class Checks:
    """A browser test's findings: each check printed as it is made, a failure's screenshot, the summary."""

    def __init__(self, name, artifacts):
        self.name, self.artifacts, self.results = name, artifacts, []
        os.makedirs(artifacts, exist_ok=True)

    def __call__(self, condition, what):
        self.results.append((bool(condition), what))
        print(("  ok    " if condition else "  FAIL  ") + what, flush=True)

    def failed_with(self, error, browser):
        """A failed wait or request: recorded, with a screenshot of where it stopped."""
        self(False, f"{type(error).__name__}: {error}")
        try:
            browser.screenshot(os.path.join(self.artifacts, "failure.png"))
        except Exception:
            pass

    def accessible(self, evaluate, where):
        """Runs axe-core's WCAG 2 A/AA and best-practice rules on the page as it is now (`evaluate`
        runs a script in the page and returns its value) and records a check: no violation."""
        source = axe_source()
        if source is None:
            self(False, f"accessibility scan of {where}: axe-core is missing (scripts/install-deps.sh --for-tests installs it)")
            return
        if not evaluate("typeof window.axe === 'object'"):
            evaluate(source + "\n;true")
        violations = evaluate(AXE_RUN)
        self(not violations, f"accessibility scan of {where}: " + ("no violations" if not violations else "; ".join(violations)))

    def summary(self):
        """Prints the tally; the exit status (1 when any check failed)."""
        failed = [what for ok, what in self.results if not ok]
        print(f"{self.name}: {len(self.results) - len(failed)} checks passed, {len(failed)} failed; screenshots in {self.artifacts}")
        return 1 if failed else 0
