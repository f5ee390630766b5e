"""An emulated phone for the browser tests: Playwright (from PyPI) driving Debian's Chromium
(`executable_path`: Playwright's own browser download is not reachable here), a Pixel-sized
touch screen, geolocation granted and set by the test, the network cut and restored, console
errors collected.
"""

import os
import shutil
import tempfile

from playwright.sync_api import sync_playwright

from cdp import find_chromium


class Phones:
    """Playwright and the Chromium binary; each `phone()` is a device of its own: its own
    browser profile (storage, service workers, position), not an incognito context (Chromium
    does not offer to install an app in one)."""

    def __init__(self):
        self.binary = find_chromium()
        if self.binary is None:
            raise RuntimeError("no Chromium: install Debian's chromium (scripts/install-deps.sh --for-tests)")
        self.playwright = sync_playwright().start()
        self.phones = []

    def phone(self, origin):
        phone = Phone(self, origin, self.playwright.devices["Pixel 5"])
        self.phones.append(phone)
        return phone

    def close(self):
        try:
            for phone in self.phones:
                phone.close()
        finally:
            self.playwright.stop()


class Phone:
    def __init__(self, phones, origin, device):
        settings = dict(device)
        settings.pop("default_browser_type", None)
        settings.update(viewport={"width": 360, "height": 640}, screen={"width": 360, "height": 640})
        self.profile = tempfile.mkdtemp(prefix="lt-phone-")
        self.context = phones.playwright.chromium.launch_persistent_context(
            self.profile, executable_path=phones.binary, args=["--no-sandbox", "--disable-dev-shm-usage"],
            permissions=["geolocation"], geolocation={"latitude": 0, "longitude": 0, "accuracy": 10}, **settings)
        self.context.grant_permissions(["geolocation"], origin=origin)
        self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
        self.errors = []
        self.page.on("console", lambda message: self.errors.append(f"console.{message.type}: {message.text}") if message.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(f"exception: {error}"))
        self.cdp = self.context.new_cdp_session(self.page)
        self.closed = False

    def navigate(self, url):
        self.page.goto(url, wait_until="load")

    def evaluate(self, expression):
        return self.page.evaluate(expression)

    def wait(self, expression, timeout=20, what=None):
        try:
            self.page.wait_for_function(f"() => {{ try {{ return Boolean({expression}); }} catch (e) {{ return false; }} }}", timeout=timeout * 1000)
        except Exception as error:
            raise AssertionError(f"timed out waiting for {what or expression}") from error

    def pump(self, seconds=0.05):
        self.page.wait_for_timeout(seconds * 1000)

    def screenshot(self, path):
        self.page.screenshot(path=path, scale="css")

    def set_position(self, latitude, longitude, accuracy=10):
        self.context.set_geolocation({"latitude": latitude, "longitude": longitude, "accuracy": accuracy})

    def set_offline(self, offline):
        self.context.set_offline(offline)

    def choose_file(self, selector, path):
        self.page.set_input_files(selector, os.path.abspath(path))

    def call(self, method, **params):
        """A DevTools-protocol command (what Playwright has no call for: installability)."""
        return self.cdp.send(method, params)

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            self.context.close()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
