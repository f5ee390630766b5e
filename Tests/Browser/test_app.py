#!/usr/bin/env python3
"""The installable tracker app (/app/) in a real browser (Playwright driving Debian's headless
Chromium, an emulated Pixel-sized phone) against a real `lt serve`.

Checks that Chromium finds it installable (manifest, service worker, icons), that a new user
registers and gets a per-device API key kept for offline starts, that the location filter and
document format are TrackerKit's (the filter run over the Freeway Drive route in the page and
here, independently); then tracks along the route with emulated geolocation: fixes sent while
online, a fix, places near me and a photo while the network is cut, all in the user's database
and lt_locations_all exactly once when it is back; the map with the track and the photo, a new
places release reaching the phone, a place's wrong position reported from the map, a second
user seeing none of it and importing a Takeout ZIP from the phone; the status kept across reopening (tracking starts again); one header
status for offline and for a server that does not answer; sign-out never dropping a fix not sent
without asking (it sends first, names the count, signs out once sent, or deletes only when told);
signing in again bringing the history back from the server, the map fitted to it; sign-in's
buttons waiting while the server answers; the app and its map opening with the server stopped,
sign-out wiping the phone; JavaScript under 300 KB compressed, every control with an accessible
name, no console error. Screenshots of each view go to the artifacts directory.

Usage: test_app.py --lt PATH/TO/lt [--artifacts DIR]
"""

import argparse
import base64
import gzip
import io
import json
import math
import os
import struct
import sys
import time
import urllib.error
import urllib.request
import zipfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Checks  # noqa: E402
from ltserve import LTServer, request  # noqa: E402
from phone import Phones  # noqa: E402

ADMIN = ("admin", "app-admin-pw")
SAMPLE_PLACES = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data", "sample-places.json")))["places"]
ROUTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data", "freeway-drive.json")
# TrackerKit's LocationPolicy.original, restated here to check the page's filter independently.
POLICY = {"foregroundAccuracy": 25, "backgroundAccuracy": 100, "foregroundDistance": 15, "backgroundDistance": 100, "minimumInterval": 15}


class Unseekable(io.RawIOBase):
    """A file zipfile cannot seek in: it writes each entry's sizes after its data, as streaming zippers do."""

    def __init__(self, sink):
        self.sink = sink

    def writable(self):
        return True

    def write(self, data):
        return self.sink.write(data)


def haversine(a, b):
    rad, radius = math.pi / 180, 6371008.8
    h = math.sin((b["lat"] - a["lat"]) * rad / 2) ** 2 + math.cos(a["lat"] * rad) * math.cos(b["lat"] * rad) * math.sin((b["lon"] - a["lon"]) * rad / 2) ** 2
    return 2 * radius * math.asin(min(1, math.sqrt(h)))


def expected_kept(fixes, background):
    """TrackerKit's LocationMonitor over `fixes`: the indexes it keeps."""
    kept, last = [], None
    for i, fix in enumerate(fixes):
        if fix["accuracy"] < 0 or fix["accuracy"] > POLICY["backgroundAccuracy" if background else "foregroundAccuracy"]:
            continue
        if last is not None:
            if haversine(last, fix) < POLICY["backgroundDistance" if background else "foregroundDistance"]:
                continue
            if not (fix["time"] - last["time"]) / 1000 > POLICY["minimumInterval"]:
                continue
        last = fix
        kept.append(i)
    return kept


def write_png(path, width, height):
    """A small test picture: a colour gradient, as a PNG."""
    rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in (x * 255 // width, y * 255 // height, 128)) for y in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def wait_until(condition, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    parser.add_argument("--artifacts", default="test-artifacts/app")
    parser.add_argument("--mode", default="db-per-user", choices=["db-per-user", "single-db"],
                        help="lt serve's --mode: a private database per user, or one shared database")
    options = parser.parse_args()
    check = Checks("app browser test", options.artifacts)
    server = LTServer(options.lt, ADMIN, "--password-iterations", "1000", "--mode", options.mode)
    # Where everyone's locations end up, the walker's under "walker:": consolidated, or the shared database itself.
    everyone_db, mine = ("lt_locations_all" if options.mode == "db-per-user" else "lt_locations_all_envoy"), "walker:"
    phones = Phones()
    origin = server.app
    app = f"{origin}/app/"
    browser = phones.phone(origin)
    try:
        browser.navigate(app)
        browser.wait("window.ltApp && window.ltApp.ready && !document.getElementById('welcome').hidden", what="the welcome screen")
        browser.evaluate("navigator.serviceWorker.ready.then(() => true)")
        browser.navigate(app)  # now under the service worker's control
        browser.wait("window.ltApp && window.ltApp.ready && navigator.serviceWorker.controller !== null", what="the service worker in control")
        errors = browser.call("Page.getInstallabilityErrors").get("installabilityErrors", [])
        check(not errors, f"Chromium finds the app installable: {errors or 'no installability errors'}")
        manifest = browser.call("Page.getAppManifest")
        check(not manifest.get("errors") and manifest.get("url", "").endswith("/app/manifest.webmanifest"), f"the manifest parses without errors: {manifest.get('errors')}")
        browser.screenshot(os.path.join(options.artifacts, "welcome.png"))
        check.accessible(browser.evaluate, "the welcome screen")

        # Every control has an accessible name (its label, text or aria-label).
        unnamed = browser.evaluate("""[...document.querySelectorAll('button, input, select, textarea, a[href]')].filter((el) => {
            const label = el.id && document.querySelector(`label[for="${el.id}"]`);
            return !((label && label.textContent.trim()) || el.textContent.trim() || el.getAttribute('aria-label') || el.title);
        }).map((el) => el.outerHTML.slice(0, 80))""")
        check(not unnamed, f"every control has an accessible name {unnamed or ''}")
        scripts = ["app.js", "store.js", "import-history.js", "sw.js"]
        compressed = sum(len(gzip.compress(urllib.request.urlopen(app + name).read())) for name in scripts)
        leaflet = json.load(urllib.request.urlopen(app + "config.json"))["leaflet"]
        with_map = compressed + len(gzip.compress(urllib.request.urlopen(app + leaflet).read()))
        check(with_map < 300 * 1024, f"the app's JavaScript is {compressed / 1024:.1f} KB compressed, {with_map / 1024:.1f} KB with the map's Leaflet (budget 300 KB)")

        # TrackerKit's filter and document, in the page: the Freeway Drive route with fixes 5 s
        # apart and varied accuracy, foreground and background, against this file's own reckoning.
        route = json.load(open(ROUTE))
        fixes = [{"lat": p["lat"], "lon": p["lng"], "accuracy": [8, 20, 30, 60, 120][i % 5], "time": 1_700_000_000_000 + i * 5_000}
                 for i, p in enumerate(route)]
        for background in (False, True):
            kept = browser.evaluate(f"""(() => {{ const m = new ltStore.LocationMonitor();
                return {json.dumps(fixes)}.map((f, i) => m.consider(f, {str(background).lower()}) === 'accepted' ? i : -1).filter((i) => i >= 0); }})()""")
            expected = expected_kept(fixes, background)
            check(kept == expected and len(expected) > 5, f"the filter keeps {len(kept)} of {len(fixes)} Freeway Drive fixes ({'background' if background else 'foreground'}), as TrackerKit's rules")
        doc = browser.evaluate("ltStore.locationDocument({lat: 37.5, lon: -122.25, accuracy: 5, time: 1700000000000}, 'ann', false, 's-1')")
        check(doc == {"type": "Feature", "created_at": 1700000000000, "geometry": {"type": "Point", "coordinates": [-122.25, 37.5]},
                      "properties": {"username": "ann", "timestamp": 1700000000000, "background": False, "session_id": "s-1"}},
              f"a kept fix is TrackerKit's location document: {json.dumps(doc)[:100]}")

        # A new user registers in the page; the device's API key is kept for offline starts.
        browser.evaluate("""(() => { document.getElementById('username').value = 'walker';
            document.getElementById('password').value = 'walker-pw-1';
            document.getElementById('register').click(); })()""")
        browser.wait("!document.getElementById('tracker').hidden", what="the tracker screen")
        account = browser.evaluate("ltApp.store.account()")
        check(account and account["username"] == "walker" and account["apiKey"] and account["database"] == ("lt_locations_user_walker" if options.mode == "db-per-user" else "lt_locations_all_envoy"),
              "registered and signed in: the per-device API key is kept in IndexedDB")
        check(request("GET", account["databaseURL"], auth=(account["apiKey"], account["apiSecret"]))[0] == 200,
              "the kept key opens the user's database on the database API")

        def user_docs():
            status, answer = request("GET", f"{account['databaseURL']}/_all_docs?include_docs=true", auth=(account["apiKey"], account["apiSecret"]))
            # The locations (the database also holds the application's validation design document).
            return [row["doc"] for row in answer["rows"] if not row["id"].startswith("_design/")] if status == 200 else None

        # Tracking with emulated geolocation: each kept fix is sent at once while online.
        browser.set_position(route[0]["lat"], route[0]["lng"])
        browser.evaluate("document.getElementById('tracking').click()")
        browser.wait("document.getElementById('last-fix').textContent !== 'none yet'", what="the first fix")
        check(browser.evaluate("document.getElementById('tracking').getAttribute('aria-pressed')") == "true", "tracking is on, and says so")
        browser.wait("document.getElementById('pending').textContent === '0' && document.getElementById('last-sync').textContent !== 'never'",
                     what="the first fix sent")
        browser.pump(16)  # TrackerKit's filter keeps a fix only more than 15 s after the last one
        browser.set_position(route[3]["lat"], route[3]["lng"])
        wait_until(lambda: len(user_docs() or []) == 2, "the second fix in the user's database")
        docs = user_docs()
        check(len(docs) == 2 and all(d["properties"]["username"] == "walker" and d["type"] == "Feature" for d in docs)
              and len({d["properties"]["session_id"] for d in docs}) == 1, "two kept fixes in walker's database, one tracking session")

        # The network cut: a fix is kept on the phone, said to wait; back online it is sent.
        browser.set_offline(True)
        browser.pump(16)
        browser.set_position(route[6]["lat"], route[6]["lng"])
        browser.wait("document.getElementById('pending').textContent === '1'", timeout=30, what="a fix kept offline")
        browser.wait("document.getElementById('sync-note').textContent.startsWith('Offline: 1 location kept on this phone')"
                     " && document.getElementById('connection').textContent === 'Offline · 1 waiting'", what="the offline note")
        check(len(user_docs()) == 2, "offline, the third fix waits on the phone (pending 1, said so)")
        browser.screenshot(os.path.join(options.artifacts, "offline-tracking.png"))
        # Places near me, offline: from the region the phone pulled at the first fix.
        here = {"lat": route[6]["lat"], "lon": route[6]["lng"]}
        nearby = sorted((haversine(here, {"lat": p["geometry"]["coordinates"][1], "lon": p["geometry"]["coordinates"][0]}), p["name"])
                        for p in SAMPLE_PLACES)
        expected_names = [name for distance, name in nearby if distance <= 2.5 * 1609.34]
        browser.evaluate("document.querySelector('#views [data-view=places]').click()")
        browser.wait("document.querySelectorAll('#places-list li').length > 0", what="places near me, offline")
        names = browser.evaluate("[...document.querySelectorAll('#places-list li')].map((li) => li.textContent.split(' — ')[0])")
        check(names == expected_names and len(names) >= 3, f"offline, places near me from the phone's copy, nearest first: {names}")
        browser.screenshot(os.path.join(options.artifacts, "places-offline.png"))
        # A photo taken offline (the file input, as a phone's camera fills it), with a caption.
        browser.evaluate("document.querySelector('#views [data-view=status]').click()")
        browser.evaluate("document.getElementById('photo-caption').value = 'bridge at dusk'")
        picture = os.path.join(options.artifacts, "input-photo.png")
        write_png(picture, 320, 240)
        browser.choose_file("#photo-input", picture)
        browser.wait("document.getElementById('pending').textContent === '2'", what="the photo kept on the phone")
        photo = browser.evaluate("ltApp.store.pending().then((docs) => docs.find((d) => d._attachments))")
        attachment = photo["_attachments"]["photo.jpg"]
        check(photo["caption"] == "bridge at dusk" and attachment["content_type"] == "image/jpeg" and len(attachment["data"]) > 1000
              and photo["properties"]["username"] == "walker" and abs(photo["geometry"]["coordinates"][1] - route[6]["lat"]) < 1e-6,
              "the photo waits as a location document at my position with a JPEG attachment and its caption")
        browser.pump(16)
        browser.set_position(route[9]["lat"], route[9]["lng"])
        browser.wait("document.getElementById('pending').textContent === '3'", timeout=30, what="a second fix kept offline")
        check(len(user_docs()) == 2, "still offline: two fixes and the photo wait on the phone")
        # Back online: what waited is sent, and the walk goes on.
        browser.set_offline(False)
        browser.wait("document.getElementById('pending').textContent === '0'", timeout=90, what="the outbox sent after the network came back")
        browser.pump(16)
        browser.set_position(route[12]["lat"], route[12]["lng"])
        wait_until(lambda: len(user_docs() or []) == 6, "the walk's last fix in the user's database")
        ids = sorted(d["_id"] for d in user_docs())
        check(len(ids) == 6 and len(set(ids)) == 6, "after the walk, all 5 kept fixes and the photo are in walker's database exactly once")
        stored = next(d for d in user_docs() if d["_id"] == photo["_id"])
        check(stored["_attachments"]["photo.jpg"]["content_type"] == "image/jpeg" and stored["_attachments"]["photo.jpg"]["length"] > 1000,
              "the photo is stored as an attachment")
        def everyone():
            rows = request("GET", f"{server.db}/{everyone_db}/_all_docs", auth=ADMIN)[1]["rows"]
            return [r["id"] for r in rows if not r["id"].startswith("_") and r["id"].startswith(mine)]
        wait_until(lambda: len(everyone()) >= 6, "consolidation")
        check(len(everyone()) == 6 and len(set(everyone())) == 6, f"and in {everyone_db} exactly once each ({len(everyone())})")
        status, photos = request("GET", f"{server.app}/api/photos", auth=ADMIN)
        check(status == 200 and any(p["caption"] == "bridge at dusk" for p in photos["photos"]), "the dashboard's photos list has it")
        # The map of my track: one line, the latest position marked; the list, newest first.
        browser.evaluate("document.querySelector('#views [data-view=map]').click()")
        browser.wait("document.querySelectorAll('path.track-line').length === 1 && document.querySelectorAll('.latest-dot').length === 1",
                     what="my track on the map")
        check(browser.evaluate("document.querySelectorAll('#track-list li.fix').length") == 5, "the map shows my track as a line and lists its 5 locations")
        # The list reads by day: the day's distance and time, each fix's time and step, no raw coordinates.
        day = browser.evaluate("[document.querySelectorAll('#track-list li.day').length, document.querySelector('#track-list .day-title').textContent, [...document.querySelectorAll('#track-list li.fix')].map((li) => li.textContent)]")
        walked = sum(haversine({"lat": route[a]["lat"], "lon": route[a]["lng"]}, {"lat": route[b]["lat"], "lon": route[b]["lng"]}) for a, b in [(0, 3), (3, 6), (6, 9), (9, 12)])
        shown_miles = float(day[1].split(", ")[-1].split(" ")[0])
        check(day[0] == 1 and "5 locations" in day[1] and abs(shown_miles * 1609.344 - walked) < 0.06 * 1609.344
              and day[2][-1].endswith("— start") and not any("37." in text for text in day[2]),
              f"my locations read as one day with its distance ({day[1]}; {walked / 1609.344:.2f} mi walked), each fix with its time and step")
        browser.wait("document.querySelectorAll('.photo-pin').length === 1 && document.querySelectorAll('#photo-list img').length === 1 && document.querySelector('#photo-list img').naturalWidth === 320",
                     what="the photo on the map and in the list")
        check(True, "the photo shows on the map and in the list")
        # Tapped, it opens in a viewer (the photo, when, where); "Show on the map" opens its pin there.
        browser.evaluate("document.querySelector('#photo-list .photo-open').click()")
        browser.wait("document.getElementById('photo-viewer').open && document.getElementById('photo-image').naturalWidth === 320", what="the photo viewer")
        details = browser.evaluate("[document.getElementById('photo-title').textContent, document.getElementById('photo-details').textContent]")
        check(details[0] == "bridge at dusk" and details[1].startswith("Taken ") and " at 37." in details[1], f"the photo viewer says what, when and where: {details}")
        browser.screenshot(os.path.join(options.artifacts, "photo-viewer.png"))
        check.accessible(browser.evaluate, "the photo viewer")
        browser.evaluate("document.getElementById('photo-on-map').click()")
        browser.wait("!document.getElementById('photo-viewer').open && document.querySelector('.leaflet-popup .photo-popup img')", what="the photo's pin, opened")
        pin = browser.evaluate("(() => { const r = document.querySelector('.photo-pin').getBoundingClientRect(); return [r.width, r.height, ltApp.map.getZoom()]; })()")
        check(pin[0] >= 44 and pin[1] >= 44 and pin[2] >= 17, f"\"Show on the map\" opens the photo's pin (a {pin[0]:.0f}×{pin[1]:.0f} px target), zoomed in")
        browser.evaluate("void ltApp.map.closePopup()")
        # Photos at one spot share a pin: within 30 m grouped, farther apart not.
        groups = browser.evaluate("""(() => { const at = (lat, lon) => ({ geometry: { coordinates: [lon, lat] } });
            return photoGroups([at(37.5, -122.3), at(37.5001, -122.3), at(37.6, -122.3), at(37.50015, -122.30015)], 30).map((g) => g.length); })()""")
        check(groups == [3, 1], f"photos within 30 m share one pin: groups of {groups}")
        # And all of it on the dashboard, signed in as walker (a page beside the app).
        dashboard = browser.context.new_page()
        dashboard.goto(f"{origin}/dashboard/")
        dashboard.fill("#username", "walker")
        dashboard.fill("#password", "walker-pw-1")
        dashboard.click("#sign-in-form button[type=submit]")
        dashboard.wait_for_function("() => document.querySelectorAll('#track-list li').length === 6", timeout=30000)
        dashboard.click("#views [data-view=photos]")
        dashboard.wait_for_function("() => [...document.querySelectorAll('#photos-list img')].some((i) => i.complete && i.naturalWidth > 0)", timeout=30000)
        check("bridge at dusk" in dashboard.inner_text("#photos-list"), "the dashboard shows walker's walk (6 locations) and the photo with its caption")
        dashboard.screenshot(path=os.path.join(options.artifacts, "dashboard-after-walk.png"))
        dashboard.close()
        # A place in the wrong spot, reported by touch: tap its pin (44 px), "Report wrong
        # position", then tap the map where it really is; confirm, and it goes for review.
        browser.wait("ltApp.placeMarkers.size > 0", what="places near me on the map")
        sizes = browser.evaluate("[...document.querySelectorAll('.place-pin')].map((pin) => { const r = pin.getBoundingClientRect(); return Math.min(r.width, r.height); })")
        check(sizes and min(sizes) >= 44, f"every place pin is a 44 px target ({min(sizes) if sizes else 'none'} px)")
        first = browser.evaluate("[...ltApp.placeMarkers.keys()][0]")
        # The user pans to it (places are around the track, not all in its view).
        browser.evaluate("ltApp.map.setView(ltApp.placeMarkers.get(%s).getLatLng(), 15, { animate: false })" % json.dumps(first))
        box = browser.evaluate("(() => { const r = ltApp.placeMarkers.get(%s).getElement().getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()" % json.dumps(first))
        browser.page.touchscreen.tap(box[0], box[1])
        browser.wait("document.querySelector('.place-details .report-position')", what="the place opened by a tap")
        check(browser.evaluate("document.querySelector('.place-details strong').textContent.length > 0 && document.querySelector('.place-details p').textContent.endsWith('from you')"),
              "tapping a place's pin opens it: its name, how far, and 'Report wrong position'")
        browser.evaluate("document.querySelector('.place-details .report-position').click()")
        browser.wait("document.getElementById('map-note').textContent.startsWith('Drag the pin')", what="the hint to drag or tap")
        moved = browser.evaluate("""(() => { const marker = ltApp.placeMarkers.get(%s); const p = marker.getLatLng();
            const to = L.latLng(p.lat + 0.001, p.lng); ltApp.map.fire('click', { latlng: to }); return [%s, to.lat, to.lng]; })()""" % (json.dumps(first), json.dumps(first)))
        browser.wait("document.querySelector('.send-correction')", what="the correction's confirmation")
        browser.evaluate("document.querySelector('.send-correction').click()")
        browser.wait("document.querySelector('.correction p').textContent.startsWith('Thank you')", what="the correction sent")
        status, reports = request("GET", f"{server.app}/api/adjustments", auth=ADMIN)
        text = json.dumps(reports)
        check(status == 200 and moved[0] in text and f"{moved[1]:.5f}"[:-1] in text and "walker" in text,
              f"the admin finds walker's report of {moved[0]} at its new position")
        browser.pump(0.5)  # the popup's fade
        browser.screenshot(os.path.join(options.artifacts, "correction.png"))
        browser.screenshot(os.path.join(options.artifacts, "map.png"))
        # A new places release reaches the phone: a place added next to me shows up.
        last = {"lat": route[12]["lat"], "lon": route[12]["lng"]}  # where the walk ended: places are near it now
        status, _ = request("POST", f"{server.app}/api/places", {"name": "Aaa New Bench", "latitude": last["lat"] + 0.0005, "longitude": last["lon"]}, auth=ADMIN)
        check(status == 201, "an admin adds a place (a new places release)")
        browser.evaluate("ltApp.places.releaseCheckInterval = 0")  # the app asks every 5 minutes; the test now
        browser.evaluate("(async () => { await ltApp.places.refresh({lat: %f, lon: %f}, (p) => fetch(p).then((r) => r.json())); })()" % (last["lat"], last["lon"]))
        browser.evaluate("document.querySelector('#views [data-view=places]').click()")
        browser.wait("document.querySelector('#places-list li') && document.querySelector('#places-list li').textContent.startsWith('Aaa New Bench')",
                     what="the new place, nearest")
        check(browser.evaluate("ltApp.places.pulls") >= 2, "the new release was pulled, and the new place is the nearest")
        # A place in the list opens on the map.
        browser.evaluate("document.querySelector('#places-list li button').click()")
        browser.wait("ltApp.view === 'map' && document.querySelector('.place-details strong') && document.querySelector('.place-details strong').textContent === 'Aaa New Bench'",
                     what="the place from the list opened on the map")
        check(True, "tapping a place in the list opens it on the map")
        browser.pump(0.5)  # the popup's fade
        browser.screenshot(os.path.join(options.artifacts, "place-opened.png"))
        check.accessible(browser.evaluate, "a place opened on the map")
        browser.evaluate("document.querySelector('#views [data-view=status]').click()")
        # A batch sent again (its answer lost to a dropped connection) adds nothing.
        browser.evaluate("(async () => { const kept = await ltApp.store.kept(); await ltApp.store.enqueue(kept); await ltApp.sync(); })()")
        check(browser.evaluate("ltApp.store.pendingCount()") == 0 and len(user_docs()) == 6, "documents sent twice are stored once")
        status, checkpoint = request("GET", f"{account['databaseURL']}/_local/lt-app-{account['apiKey']}", auth=(account["apiKey"], account["apiSecret"]))
        check(status == 200 and checkpoint.get("sent") == 6, f"the device's _local record says 6 sent: {checkpoint.get('sent')}")
        browser.screenshot(os.path.join(options.artifacts, "tracking.png"))
        check.accessible(browser.evaluate, "tracking")
        browser.evaluate("document.getElementById('tracking').click()")
        browser.pump(0.5)

        # Tracking settings: the filter takes them, they survive reopening the app, sent locations
        # older than kept leave the phone (never one not sent), and "original" puts TrackerKit's back.
        browser.evaluate("""(async () => { const old = Date.now() - 400 * 86400000;
            await ltApp.store.remember([{ _id: 'ancient-fix', type: 'Feature', created_at: old,
                geometry: { type: 'Point', coordinates: [-122.3, 37.5] }, properties: { username: 'walker', timestamp: old } }]); return true; })()""")
        browser.evaluate("""(() => { document.getElementById('settings').open = true;
            document.getElementById('setting-interval').value = '60'; document.getElementById('setting-distance').value = '50';
            document.getElementById('setting-accuracy').value = '40'; document.getElementById('setting-precise').checked = false;
            document.getElementById('setting-keep').value = '365'; document.getElementById('settings-form').requestSubmit(); })()""")
        browser.wait("document.getElementById('settings-note').textContent.startsWith('Saved')", what="the settings saved")
        policy = browser.evaluate("ltApp.monitor.policy")
        note = browser.evaluate("document.getElementById('settings-note').textContent")
        gone = browser.evaluate("ltApp.store.kept().then((docs) => !docs.some((d) => d._id === 'ancient-fix'))")
        check(policy["minimumInterval"] == 60 and policy["foregroundDistance"] == 50 and policy["foregroundAccuracy"] == 40
              and policy["backgroundDistance"] == 100 and "1 older removed" in note and gone,
              f"tracking settings go into the filter; a sent location older than a year leaves the phone: {note}")
        browser.screenshot(os.path.join(options.artifacts, "settings.png"))
        check.accessible(browser.evaluate, "tracking settings")
        browser.navigate(app)
        browser.wait("window.ltApp && window.ltApp.ready && !document.getElementById('tracker').hidden", what="the app reopened")
        kept = browser.evaluate("[ltApp.monitor.policy.minimumInterval, document.getElementById('setting-interval').value, ltApp.settings.precise]")
        check(kept == [60, "60", False], f"the settings survive reopening the app: {kept}")
        browser.evaluate("document.getElementById('settings-reset').click()")
        browser.wait("ltApp.monitor.policy.minimumInterval === 15 && ltApp.settings.precise === true", what="the original settings")
        check(all(browser.evaluate(f"ltApp.monitor.policy.{name}") == value for name, value in POLICY.items()),
              "\"Back to the original settings\" restores TrackerKit's LocationPolicy.original")
        # The cut network's failed requests are the expected console errors; nothing else.
        errors = [e for e in browser.errors if "ERR_INTERNET_DISCONNECTED" not in e]
        check(not errors, "no console errors" + ("" if not errors else ": " + "; ".join(errors[:5])))

        # A second user, on a phone of their own, sees none of walker's data, here or on the server.
        other = phones.phone(origin)
        try:
            other.navigate(app)
            other.wait("window.ltApp && window.ltApp.ready && !document.getElementById('welcome').hidden", what="runner's welcome screen")
            other.evaluate("""(() => { document.getElementById('username').value = 'runner';
                document.getElementById('password').value = 'runner-pw-2';
                document.getElementById('register').click(); })()""")
            other.wait("!document.getElementById('tracker').hidden", what="runner signed in")
            other.evaluate("document.querySelector('#views [data-view=map]').click()")
            other.pump(1)
            shown = other.evaluate("[document.querySelectorAll('#track-list li.fix').length, document.querySelectorAll('#photo-list img').length, document.body.innerText.includes('bridge at dusk')]")
            runner = other.evaluate("ltApp.store.account()")
            # Walker's database refuses runner's key; the shared one shows runner only runner's documents.
            status, answer = request("GET", f"{account['databaseURL']}/_all_docs", auth=(runner["apiKey"], runner["apiSecret"]))
            seen = [r["id"] for r in (answer or {}).get("rows", []) if not r["id"].startswith("_design/")] if status == 200 else []
            check(shown == [0, 0, False] and (status in (401, 403) or (status == 200 and seen == [])) and not other.errors,
                  f"a second user sees none of walker's locations or photos, on their phone or through the server ({shown}, {status})")
            # Runner brings a history from the phone: a Takeout download (a ZIP written as a
            # streaming zipper writes it, with a file that is no history) through "Bring your
            # history"; the page shows its result, the locations are runner's; again adds none.
            records = {"locations": [{"latitudeE7": 377000000 + i * 900, "longitudeE7": -1224000000 + i * 500, "accuracy": 5 + i % 9,
                                      "timestamp": f"2023-03-0{1 + i // 1000}T{i // 60 % 24:02d}:{i % 60:02d}:00Z"} for i in range(2000)]}
            takeout = io.BytesIO()
            with zipfile.ZipFile(Unseekable(takeout), "w", zipfile.ZIP_DEFLATED) as archive:
                archive.writestr("Takeout/Location History/Settings.json", json.dumps({"deviceSettings": []}))
                archive.writestr("Takeout/Location History/Records.json", json.dumps(records, indent=2))
            def upload():
                other.evaluate(f"""(() => {{ const bytes = Uint8Array.from(atob('{base64.b64encode(takeout.getvalue()).decode()}'), (c) => c.charCodeAt(0));
                    const transfer = new DataTransfer(); transfer.items.add(new File([bytes], 'takeout-001.zip', {{ type: 'application/zip' }}));
                    document.getElementById('history-import').open = true;
                    document.getElementById('import-file').files = transfer.files;
                    document.getElementById('import-form').requestSubmit(); }})()""")
            other.evaluate("document.querySelector('#views [data-view=status]').click()")
            upload()
            other.wait("document.getElementById('import-status').textContent.includes('ZIP archive')", what="runner's import result")
            said = other.evaluate("[document.getElementById('import-status').textContent, document.getElementById('import-progress').value]")
            status, jobs = request("GET", f"{server.app}/api/me/imports", auth=(runner["apiKey"], runner["apiSecret"]))
            last = (jobs or {}).get("imports", [{}])[0]
            check("(a ZIP archive, 1 location file): 2000 locations stored, 0 already there" in said[0] and said[1] == 1
                  and last.get("entries") == [{"name": "Takeout/Location History/Records.json", "format": "google-records", "locations": 2000}],
                  f"the app imports a Takeout ZIP from the phone and says what it stored: {said[0][:120]}")
            other.evaluate("document.getElementById('import-status').scrollIntoView()")
            other.screenshot(os.path.join(options.artifacts, "import-phone.png"))
            check.accessible(other.evaluate, "the history import")
            upload()
            other.wait("document.getElementById('import-status').textContent.includes('0 locations stored')", what="runner's second import")
            check("2000 already there" in other.evaluate("document.getElementById('import-status').textContent"),
                  "the same archive again stores nothing")
        finally:
            other.close()

        # Closed while tracking, reopened: the Tracking screen says what it said, and tracks again.
        status_js = "[document.getElementById('last-fix').textContent, document.getElementById('last-sync').textContent]"
        browser.evaluate("document.getElementById('tracking').click()")
        browser.pump(16)
        browser.set_position(route[15]["lat"], route[15]["lng"])
        browser.wait("ltApp.lastFix && Math.abs(ltApp.lastFix.lat - %f) < 1e-6 && document.getElementById('pending').textContent === '0'" % route[15]["lat"],
                     timeout=30, what="a fix sent while tracking again")
        before = browser.evaluate(status_js)
        browser.navigate(app)
        browser.wait("window.ltApp && window.ltApp.ready && !document.getElementById('tracker').hidden", what="the app reopened")
        browser.wait("document.getElementById('connection').textContent === 'Online · all sent'", what="the header's status after reopening")
        after = browser.evaluate(status_js)
        # (Opening syncs again, so the last sync may be newer than before; never "never".)
        check(after[0] == before[0] and before[0] != "none yet" and after[1] != "never"
              and browser.evaluate("document.getElementById('tracking').getAttribute('aria-pressed')") == "true",
              f"reopened, the app shows the last fix and sync it showed ({after[0][:20]}…, {after[1]}) and tracks again")

        # The server unreachable while the network is up (its port refusing): fixes wait, and
        # the header says the server does not answer — not "online", and not as an error.
        browser.context.route(f"{server.db}/**", lambda intercepted: intercepted.abort("connectionrefused"))
        browser.pump(16)
        browser.set_position(route[18]["lat"], route[18]["lng"])
        browser.wait("document.getElementById('pending').textContent === '1'", timeout=30, what="a fix kept while the server does not answer")
        browser.wait("document.getElementById('connection').textContent === 'Server unreachable · 1 waiting'", what="the header saying the server does not answer")
        check(browser.evaluate("document.getElementById('tracker-error').textContent") == ""
              and "does not answer" in browser.evaluate("document.getElementById('sync-note').textContent"),
              "the header says 'Server unreachable · 1 waiting'; the note says the fix waits on the phone (no error)")
        browser.screenshot(os.path.join(options.artifacts, "server-unreachable.png"))

        # Signing out with a fix not sent: it tries to send, then asks with the count; nothing is
        # deleted without the user's word, and "once they are sent" waits for the server.
        browser.evaluate("document.getElementById('sign-out').click()")
        browser.wait("document.getElementById('sign-out-dialog').open", what="the sign-out question")
        question = browser.evaluate("document.getElementById('sign-out-text').textContent")
        check(question.startswith("1 location") and "cannot be reached" in question and "deletes it" in question, f"sign-out asks first: {question}")
        browser.screenshot(os.path.join(options.artifacts, "sign-out-asks.png"))
        check.accessible(browser.evaluate, "the sign-out question")
        browser.evaluate("document.getElementById('sign-out-stay').click()")
        check(not browser.evaluate("document.getElementById('sign-out-dialog').open") and browser.evaluate("ltApp.store.pendingCount()") == 1
              and browser.evaluate("ltApp.store.account().then((a) => a && a.username)") == "walker", "'Stay signed in' keeps the account and the waiting fix")
        browser.evaluate("document.getElementById('sign-out').click()")
        browser.wait("document.getElementById('sign-out-dialog').open", what="the sign-out question again")
        browser.evaluate("document.getElementById('sign-out-later').click()")
        browser.wait("document.getElementById('sync-note').textContent.startsWith('You will be signed out once')", what="the promise to sign out once sent")
        check(browser.evaluate("ltApp.store.pendingCount()") == 1 and not browser.evaluate("document.getElementById('tracker').hidden")
              and browser.evaluate("document.getElementById('tracking').getAttribute('aria-pressed')") == "false",
              "'Sign out once they are sent': still signed in with the fix waiting, tracking stopped")
        # Closing and reopening the app keeps that choice, and the fix.
        browser.navigate(app)
        browser.wait("window.ltApp && window.ltApp.ready && !document.getElementById('tracker').hidden", what="the app reopened, still signed in")
        browser.wait("document.getElementById('sync-note').textContent.startsWith('You will be signed out once')", what="the choice kept after reopening")
        check(browser.evaluate("ltApp.store.pendingCount()") == 1 and browser.evaluate("ltApp.signOutWhenSent") is True,
              "reopened before the network came back: still signed in, the fix waiting, still to sign out once it is sent")
        browser.context.unroute(f"{server.db}/**")
        browser.evaluate("ltApp.sync()")  # the retry timer's next attempt, now
        browser.wait("!document.getElementById('welcome').hidden", timeout=30, what="signed out once the fix was sent")
        # 6 from the walk; tracking on again: where I stood (a session's first fix), route 15, route 18.
        wait_until(lambda: len(user_docs() or []) >= 9, "the waiting fix in walker's database")
        stored = sorted((d["created_at"], d["geometry"]["coordinates"][1]) for d in user_docs())
        check(len(stored) == 9 and abs(stored[-1][1] - route[18]["lat"]) < 1e-6 and browser.evaluate("ltApp.store.account().then((a) => !a)"),
              f"the server answered again: the fix was sent, then the phone signed out ({len(stored)} documents on the server, the newest at {stored[-1][1]})")

        # Signing in again brings my history back from the server: the track and the photo.
        sign_in = ("(() => { document.getElementById('username').value = 'walker'; document.getElementById('password').value = 'walker-pw-1';"
                   " document.getElementById('sign-in').click(); })()")
        browser.evaluate(sign_in)
        browser.wait("!document.getElementById('tracker').hidden", what="walker signed in again")
        browser.evaluate("document.querySelector('#views [data-view=map]').click()")
        browser.wait("document.querySelectorAll('#track-list li.fix').length === 8 && document.querySelectorAll('path.track-line').length === 1"
                     " && [...document.querySelectorAll('#photo-list img')].some((i) => i.complete && i.naturalWidth === 320)",
                     timeout=30, what="the history restored after signing in")
        check(browser.evaluate("document.getElementById('track-empty').hidden && document.getElementById('photos-empty').hidden"),
              "signed in again, the map shows my 8 locations and my photo from the server")
        # The map fits what it shows: every point inside its view, the track filling much of it.
        fit = browser.evaluate("""(() => { const view = ltApp.map.getBounds();
            const line = ltApp.trackLayer.getLayers().find((layer) => layer instanceof L.Polyline);
            const points = line.getLatLngs(); const track = L.latLngBounds(points);
            const share = Math.max((track.getEast() - track.getWest()) / (view.getEast() - view.getWest()),
                                   (track.getNorth() - track.getSouth()) / (view.getNorth() - view.getSouth()));
            return [points.every((p) => view.contains(p)), share]; })()""")
        check(fit[0] and fit[1] > 0.5, f"the map fits my track: every point in view, the track spans {fit[1]:.0%} of it")
        browser.screenshot(os.path.join(options.artifacts, "history-restored.png"))
        check.accessible(browser.evaluate, "history restored after signing in again")
        browser.evaluate("document.querySelector('#views [data-view=status]').click()")

        # Offline, the user may still choose to drop what waits: only by saying so.
        browser.set_offline(True)
        browser.evaluate("document.getElementById('tracking').click()")
        browser.pump(16)
        browser.set_position(route[21]["lat"], route[21]["lng"])
        # Where tracking started (route 18) and route 21.
        browser.wait("document.getElementById('pending').textContent === '2'", timeout=30, what="two fixes kept offline")
        colours = browser.evaluate("[getComputedStyle(document.getElementById('sync-note')).color, getComputedStyle(document.getElementById('tracker-error')).color]")
        header = browser.evaluate("document.getElementById('connection').textContent")
        check(header == "Offline · 2 waiting" and colours[0] != colours[1], f"offline: '{header}', said as a note, not in the error colour ({colours})")
        browser.evaluate("document.getElementById('sign-out').click()")
        browser.wait("document.getElementById('sign-out-dialog').open", what="the sign-out question, offline")
        question = browser.evaluate("document.getElementById('sign-out-text').textContent")
        check(question.startswith("2 locations") and "no network" in question, f"offline, the question counts 2 and says there is no network: {question}")
        browser.evaluate("document.getElementById('sign-out-discard').click()")
        browser.wait("!document.getElementById('welcome').hidden", what="signed out after 'Delete them'")
        check(browser.evaluate("ltApp.store.pendingCount()") == 0 and len(user_docs()) == 9, "'Delete them and sign out' deletes the waiting fixes, as the user chose")
        browser.set_offline(False)
        # A sign-in that waits for the server shows it: both buttons wait (no second request).
        browser.context.route(f"{origin}/api/login", lambda intercepted: (time.sleep(1.5), intercepted.continue_()))
        browser.evaluate(sign_in)
        busy = browser.evaluate("[document.getElementById('sign-in').disabled, document.getElementById('register').disabled, document.getElementById('sign-in').textContent]")
        check(busy == [True, True, "Signing in…"], f"while signing in, both buttons wait and the pressed one says so: {busy}")
        browser.wait("!document.getElementById('tracker').hidden", what="walker signed in once more")
        browser.context.unroute(f"{origin}/api/login")
        wait_until(lambda: browser.evaluate("ltApp.store.kept().then((kept) => kept.length)") == 9, "the history restored once more")

        # The server stopped: the app still opens, signed in, with what it kept.
        server.stop()
        browser.navigate(app)
        browser.wait("window.ltApp && window.ltApp.ready && !document.getElementById('tracker').hidden", what="the app without its server")
        check(browser.evaluate("document.getElementById('who').textContent") == "walker",
              "with the server stopped the app opens from its cache, signed in")
        browser.screenshot(os.path.join(options.artifacts, "offline.png"))
        browser.evaluate("document.querySelector('#views [data-view=map]').click()")
        browser.wait("document.querySelectorAll('path.track-line').length === 1 && document.querySelectorAll('#track-list li.fix').length === 8",
                     what="the map without the server")
        check(True, "and its map (Leaflet from the cache) shows the track kept on the phone")
        browser.screenshot(os.path.join(options.artifacts, "map-offline.png"))

        # Signing out wipes this phone's data.
        browser.evaluate("document.getElementById('sign-out').click()")
        browser.wait("!document.getElementById('welcome').hidden", what="the welcome screen after signing out")
        check(browser.evaluate("ltApp.store.account().then((a) => a === undefined || a === null)") and browser.evaluate("ltApp.store.pendingCount()") == 0,
              "signing out removed the account and the kept fixes")

    except Exception as error:
        check.failed_with(error, browser)
    finally:
        phones.close()
        try:
            server.stop()
        except Exception:
            pass
    sys.exit(check.summary())


if __name__ == "__main__":
    main()
