#!/usr/bin/env python3
"""The dashboard in a real browser (headless Chromium) against a real `lt serve`.

Signs in as a tracker user and sees their track (and nobody else's), sees a location a device
pushes appear live, signs in as an admin and sees one marker per seeded place, approves a
correction and sees the place move, exports a file, and looks right on a phone-sized screen;
the page logs no console error anywhere. Screenshots of each view go to the artifacts directory.

Usage: test_dashboard.py --lt PATH/TO/lt [--artifacts DIR]
"""

import argparse
import json
import math
import os
import re
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, Checks, find_chromium  # noqa: E402
from ltserve import LTServer, request  # noqa: E402

ADMIN = ("admin", "dash-admin-pw")
# A 4×4 PNG (a small red square).
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg=="


def haversine(a, b):
    rad, radius = math.pi / 180, 6371008.8
    h = math.sin((b[0] - a[0]) * rad / 2) ** 2 + math.cos(a[0] * rad) * math.cos(b[0] * rad) * math.sin((b[1] - a[1]) * rad / 2) ** 2
    return 2 * radius * math.asin(min(1, math.sqrt(h)))


def location(i, user, lat, lon):
    t = 1_700_000_000_000 + i * 60_000
    return {"_id": f"{user}-fix-{i:03d}", "type": "Feature", "created_at": t,
            "geometry": {"type": "Point", "coordinates": [lon, lat]},
            "properties": {"username": user, "timestamp": t, "background": False, "session_id": "browser-test"}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    parser.add_argument("--artifacts", default="test-artifacts/dashboard")
    options = parser.parse_args()
    if find_chromium() is None:
        print("dashboard browser test: FAILED (no Chromium; scripts/install-deps.sh --for-tests installs it)")
        return 1
    check = Checks("dashboard browser test", options.artifacts)
    server = LTServer(options.lt, ADMIN)
    browser = Browser()
    try:
        # Two users with locations; alice's device keys push through the database API.
        keys = {}
        for user in ("alice", "bob"):
            assert request("PUT", f"{server.app}/api/users/{user}", {"password": f"pw-{user}"})[0] == 201
            status, login = request("POST", f"{server.app}/api/login", {"username": user, "password": f"pw-{user}"})
            assert status == 200
            keys[user] = (login["api_key"], login["api_password"])
        for i in range(12):
            doc = location(i, "alice", 37.47 + i * 0.002, -122.32 + i * 0.001)
            assert request("PUT", f"{server.db}/lt_locations_user_alice/{doc['_id']}", doc, keys["alice"])[0] == 201
        # Two photos taken on alice's phone: location documents with an image attachment (as GeoPix's).
        for i in range(2):
            doc = location(20 + i, "alice", 37.49 + i * 0.003, -122.31)
            doc["_id"] = f"alice-photo-{i}"
            doc["caption"] = f"view {i}"
            doc["_attachments"] = {"photo.png": {"content_type": "image/png", "data": PNG}}
            assert request("PUT", f"{server.db}/lt_locations_user_alice/{doc['_id']}", doc, keys["alice"])[0] == 201
        for i in range(5):
            doc = location(i, "bob", 40.7 + i * 0.001, -74.0)
            assert request("PUT", f"{server.db}/lt_locations_user_bob/{doc['_id']}", doc, keys["bob"])[0] == 201

        # Alice signs in and sees her track only.
        browser.navigate(f"{server.app}/dashboard/")
        browser.wait("!document.getElementById('sign-in').hidden", what="the sign-in form")
        # The form shows only once the script takes it (the page as served has it hidden), and every
        # form holding a password is sent by POST: a password never lands in the page's address.
        page = urllib.request.urlopen(f"{server.app}/dashboard/").read().decode()
        check(re.search(r'<section id="sign-in"[^>]*\bhidden\b', page) is not None
              and browser.evaluate("[...document.querySelectorAll('form')].filter(f => f.querySelector('input[type=password]')).every(f => f.method === 'post')"),
              "the sign-in form waits for the script, and password forms are sent by POST")
        browser.evaluate("""(() => {
            document.getElementById('username').value = 'alice';
            document.getElementById('password').value = 'pw-alice';
            document.getElementById('sign-in-form').requestSubmit(); })()""")
        browser.wait("window.lt.session && window.lt.session.name === 'alice' && document.querySelectorAll('#track-list li').length === 14",
                     what="alice's 14 locations")
        # Her track as a line: the path, arrows along it, every fix a dot (in clusters where they
        # crowd), the start and the latest position marked.
        browser.wait("document.querySelectorAll('.leaflet-marker-icon.latest').length === 1", what="the latest position")
        track = browser.evaluate("""(() => {
            const fixes = window.lt.fixes.getLayers();
            // Each fix shows as its dot or inside a cluster (markercluster's visible parent).
            const shown = fixes.filter((f) => (window.lt.fixes.getVisibleParent ? window.lt.fixes.getVisibleParent(f) : f) !== null).length;
            return [document.querySelectorAll('path.track-line').length, document.querySelectorAll('.leaflet-marker-icon.arrow').length,
                    shown, document.querySelectorAll('.leaflet-marker-icon.start').length, fixes.length,
                    document.querySelectorAll('.leaflet-marker-icon.fix, .leaflet-marker-icon.marker-cluster').length,
                    typeof window.lt.fixes.getVisibleParent === 'function']; })()""")
        check(track[0] == 1 and track[1] >= 5 and track[2] == 13 and track[3] == 1 and track[4] == 13 and 1 <= track[5] <= 13 and track[6],
              f"her track: one line, {track[1]} direction arrows, 13 earlier fixes shown as {track[5]} dots and clusters, start and latest marked")
        # The arrows point the way she went: north-east (her fixes go north, then to the photos' spot).
        bearings = browser.evaluate("window.lt.layer.getLayers().filter((l) => l.bearing !== undefined).map((l) => l.bearing)")
        check(len(bearings) >= 5 and all(0 <= b < 360 for b in bearings) and sum(1 for b in bearings if b < 90) >= len(bearings) // 2,
              f"direction arrows follow the track: {[round(b) for b in bearings]}")
        # One whole day (the day of her newest location), the map fitted to all of it, said in
        # words: the day, how many, from when to when, how far.
        inside = browser.evaluate("""(() => { const b = window.lt.map.getBounds();
            return window.lt.track.every((d) => b.contains([d.geometry.coordinates[1], d.geometry.coordinates[0]])); })()""")
        summary = browser.evaluate("document.getElementById('track-summary').textContent")
        check(inside and re.search(r"2023: 14 locations, .+ to .+ \(21 min\), [\d.]+ (mi|km|ft|m) travelled", summary),
              f"her day on open: the map holds all 14 locations; {summary}")
        rows = browser.evaluate("[...document.querySelectorAll('#track-list li')].slice(0, 2).map((li) => li.textContent)")
        check(re.match(r"^\d?\d:\d\d( [AP]M)? · start$", rows[0]) and re.match(r"^\d?\d:\d\d( [AP]M)? · \d+ (ft|m) on$", rows[1]),
              f"each row a time and the distance from the one before, no raw coordinates: {rows}")
        # Units: the browser's locale (en-US here: miles, feet), or chosen in the header.
        default_units = browser.evaluate("document.getElementById('units').value")
        browser.evaluate("{ const u = document.getElementById('units'); u.value = 'metric'; u.dispatchEvent(new Event('change')); }")
        browser.wait("/ km travelled|\\d m travelled/.test(document.getElementById('track-summary').textContent)", what="the summary in km")
        metric_rows = browser.evaluate("[...document.querySelectorAll('#track-list li')].slice(1, 3).map((li) => li.textContent)")
        check(default_units == "imperial" and all(r.endswith(" m on") for r in metric_rows),
              f"distances in the locale's units ({default_units}), switched to metric everywhere: {metric_rows}")
        # The day before: nothing, said so; "Latest day" comes back.
        browser.evaluate("document.getElementById('track-prev').click()")
        browser.wait("document.getElementById('track-summary').textContent.includes('no locations')", what="the empty day before")
        empty_day = browser.evaluate("[document.getElementById('track-summary').textContent, document.querySelector('#track-places li').textContent]")
        check("2023" in empty_day[0] and "Latest day" in empty_day[0] and "No location that day" in empty_day[1], f"an empty day says why and what to do: {empty_day[0]}")
        browser.evaluate("document.getElementById('track-latest').click()")
        browser.wait("document.querySelectorAll('#track-list li').length === 14", what="back to her latest day")
        text = browser.evaluate("document.body.innerText")
        check("bob" not in text and "40.70" not in text, "alice's page shows none of bob's data")
        check(browser.evaluate("getComputedStyle(document.querySelector('#views [data-view=review]')).display") == "none"
              and browser.evaluate("getComputedStyle(document.querySelector('#views [data-view=analysis]')).display") == "none",
              "a user sees no corrections or all-locations view")
        # Her session cookie (HttpOnly: read through DevTools) opens nothing beyond her own data.
        cookie = next(c for c in browser.call("Network.getCookies")["cookies"] if c["name"] == "lt_session")
        check(cookie["httpOnly"] and cookie.get("sameSite") == "Strict", "the session cookie is HttpOnly and SameSite=Strict")
        def with_cookie(path, method="GET", extra=None):
            req = urllib.request.Request(server.app + path, method=method, headers=dict({"Cookie": f"lt_session={cookie['value']}"}, **(extra or {})))
            try:
                with urllib.request.urlopen(req, timeout=30) as response:
                    return response.status, json.loads(response.read() or b"null")
            except urllib.error.HTTPError as error:
                return error.code, None
        status, mine = with_cookie("/api/me/locations?limit=1000")
        check(status == 200 and len(mine["locations"]) == 14 and all(d["properties"]["username"] == "alice" for d in mine["locations"]),
              "her locations through the API: hers only")
        check(with_cookie("/api/adjustments")[0] == 403, "her session cannot list corrections")
        check(with_cookie("/api/analysis/locations?format=csv")[0] == 403, "her session cannot export everyone's locations")
        check(with_cookie("/api/analysis/users/bob/stats")[0] == 403, "her session cannot read bob's statistics")
        check(with_cookie("/api/places", "POST", {"X-Requested-With": "lt-dashboard"})[0] == 403, "her session cannot edit places")
        check(with_cookie("/api/keys", "GET")[0] == 200, "her session lists her own API keys")
        check(with_cookie("/api/keys/" + keys["alice"][0], "DELETE")[0] == 403, "a cookie write without the dashboard's header is refused")
        places_near = browser.evaluate("document.querySelectorAll('#track-places li').length")
        expected_near = 0
        _, all_places = request("GET", f"{server.db}/lt_places/_all_docs?include_docs=true", auth=ADMIN)
        seeded = [row["doc"] for row in all_places["rows"] if "geometry" in row.get("doc", {})]
        latest = (37.47 + 11 * 0.002, -122.32 + 11 * 0.001)
        expected_near = sum(1 for p in seeded if haversine(latest, (p["geometry"]["coordinates"][1], p["geometry"]["coordinates"][0])) <= 4023.35)
        check(places_near == expected_near, f"places within 4023.35 m of the latest location: {places_near} (brute force {expected_near})")
        browser.screenshot(os.path.join(options.artifacts, "my-tracks.png"))
        check.accessible(browser.evaluate, "My tracks")

        # A device pushes a new location: it appears without a reload.
        new = location(12, "alice", 37.495, -122.305)
        assert request("PUT", f"{server.db}/lt_locations_user_alice/{new['_id']}", new, keys["alice"])[0] == 201
        browser.wait("document.querySelectorAll('#track-list li').length === 15 && document.querySelector('#track-list li[data-id=\"alice-fix-012\"]')",
                     what="the pushed location, live")
        check(True, "a location pushed by a device appears live")
        browser.screenshot(os.path.join(options.artifacts, "my-tracks-live.png"))

        # Her photos: a list with the images and markers whose popups show them; not bob's to fetch.
        browser.evaluate("document.querySelector('#views [data-view=photos]').click()")
        browser.wait("document.querySelectorAll('#photos-list img').length === 2 && [...document.querySelectorAll('#photos-list img')].every(i => i.complete && i.naturalWidth === 4)",
                     what="alice's 2 photos, loaded")
        # A photo opens in a viewer: large, whose, when, where; "Show on map" goes to its place.
        browser.evaluate("document.querySelector('#photos-list .photo-open').click()")
        browser.wait("document.getElementById('photo-viewer').open && document.getElementById('photo-image').complete && document.getElementById('photo-image').naturalWidth === 4",
                     what="the photo viewer")
        viewer = browser.evaluate("[document.getElementById('photo-title').textContent, document.getElementById('photo-details').textContent, document.getElementById('photo-image').getBoundingClientRect().width]")
        check(viewer[0].startswith("view ") and "Taken by alice" in viewer[1] and "37.49" in viewer[1] and viewer[2] >= 190,
              f"the viewer shows the photo ({viewer[2]:.0f} px wide), who, when and where: {viewer[1]}")
        browser.screenshot(os.path.join(options.artifacts, "photo-viewer.png"))
        check.accessible(browser.evaluate, "the photo viewer")
        browser.evaluate("document.getElementById('photo-on-map').click()")
        browser.wait("!document.getElementById('photo-viewer').open && document.querySelector('.photo-popup img')", what="the photo's place on the map")
        zoom = browser.evaluate("window.lt.map.getZoom()")
        check(zoom >= 16, f"\"Show on map\" closes the viewer and opens the photo's marker, zoomed in (zoom {zoom})")
        browser.evaluate("void window.lt.map.closePopup()")
        browser.wait("window.lt.photos.length === 2 && document.querySelectorAll('.leaflet-marker-icon').length >= 1", what="photo markers")
        check(browser.evaluate("document.getElementById('photos-summary').textContent") == "2 photos.", "her photos: 2, listed with their images")
        browser.evaluate("""new Promise(done => { const m = window.lt.photoMarkers[0];
            const open = () => { m.openPopup(); done(true); };
            if (window.lt.photoGroup.zoomToShowLayer) window.lt.photoGroup.zoomToShowLayer(m, open); else open(); })""")
        browser.wait("document.querySelector('.photo-popup img') && document.querySelector('.photo-popup img').complete && document.querySelector('.photo-popup img').naturalWidth === 4",
                     what="a photo marker's popup with the image")
        check(True, "a photo marker's popup shows the image")
        status, _ = request("GET", f"{server.app}/api/photos/alice-photo-0/photo.png", auth=keys["bob"])
        check(status == 404, "bob's key cannot fetch alice's photo")
        browser.screenshot(os.path.join(options.artifacts, "photos.png"))
        browser.evaluate("document.querySelector('#views [data-view=tracks]').click()")
        browser.wait("document.querySelectorAll('#track-list li').length === 15", what="back to her track")

        # On a phone-sized screen the map and the list stack.
        browser.set_viewport(390, 844, mobile=True)
        browser.pump(0.5)
        layout = browser.evaluate("""(() => { const m = document.getElementById('map').getBoundingClientRect();
            const p = document.getElementById('panel').getBoundingClientRect(); return [m.width, m.height, p.top >= m.bottom - 1]; })()""")
        check(layout[0] <= 390 and layout[1] > 200 and layout[2], f"phone layout: map {layout[0]:.0f}×{layout[1]:.0f}, list below it")
        browser.screenshot(os.path.join(options.artifacts, "my-tracks-phone.png"))
        check.accessible(browser.evaluate, "My tracks on a phone")
        # Every button a finger can hit there: 44 px tall at least (navigation and sign-out too).
        small = browser.evaluate("""[...document.querySelectorAll('button, a.button')].filter((b) => b.offsetParent !== null)
            .map((b) => [b.textContent.trim() || b.getAttribute('aria-label'), b.getBoundingClientRect().height]).filter(([, h]) => h < 44)""")
        check(not small, f"on a phone every visible button is at least 44 px tall {small or ''}")
        # Each filter's label sits on its own field (just above it), not at the end of another row.
        apart = browser.evaluate("""[...document.querySelectorAll('form.row label')].filter((l) => l.offsetParent !== null).filter((label) => {
            const input = document.getElementById(label.htmlFor); const a = label.getBoundingClientRect(), b = input.getBoundingClientRect();
            return !(a.bottom <= b.top + 2 && b.top - a.bottom < 12 && a.left < b.right && b.left < a.right); }).map((l) => l.textContent)""")
        check(not apart, f"every filter label sits just above its own field {apart or ''}")
        browser.set_viewport(1280, 800)

        # Alice reports a corrected position of a place.
        target = next(p for p in seeded if p.get("name"))
        moved_to = (target["geometry"]["coordinates"][1] + 0.001, target["geometry"]["coordinates"][0] + 0.001)
        status, _ = request("POST", f"{server.app}/api/places/{target['_id']}/adjustments",
                            {"latitude": moved_to[0], "longitude": moved_to[1], "comment": "the entrance is across the street"}, keys["alice"])
        assert status == 201

        # The admin: sign out, sign in, one marker per seeded place.
        browser.evaluate("document.getElementById('sign-out').click()")
        browser.wait("!document.getElementById('sign-in').hidden && !window.lt.session", what="signed out")
        browser.evaluate(f"""(() => {{
            document.getElementById('username').value = '{ADMIN[0]}';
            document.getElementById('password').value = '{ADMIN[1]}';
            document.getElementById('sign-in-form').requestSubmit(); }})()""")
        # The admin opens on the people tracked: each with when and where last seen and the
        # devices, a marker per person in their colour, the map fitted to all of them.
        browser.wait("window.lt.session && window.lt.session.kind === 'admin' && document.querySelectorAll('#people-list li').length === 2",
                     what="the people overview")
        people = browser.evaluate("[...document.querySelectorAll('#people-list li')].map((li) => li.textContent)")
        check(people[0].startswith("alice") and "last seen" in people[0] and "device" in people[0] and people[1].startswith("bob"),
              f"people listed with last seen and devices: {[p[:70] for p in people]}")
        browser.wait("document.querySelectorAll('path.person').length === 2", what="a marker per person")
        fills = browser.evaluate("[...document.querySelectorAll('path.person')].map((p) => p.getAttribute('fill'))")
        in_view = browser.evaluate("""(() => { const b = window.lt.map.getBounds();
            return window.lt.people.every((p) => b.contains([p.last.lat, p.last.lon])); })()""")
        check(len(set(fills)) == 2 and in_view, f"a colour per person ({fills}), everyone's last position in view")
        browser.screenshot(os.path.join(options.artifacts, "people.png"))
        check.accessible(browser.evaluate, "People")
        # Alice's last day as a route, in her colour, fitted; bob hidden with his box.
        browser.evaluate("document.querySelector('#people-list button[aria-label^=\"Show alice\"]').click()")
        browser.wait("window.lt.trip && window.lt.trip.name === 'alice' && document.querySelectorAll('path.track-line').length === 1", what="alice's trip")
        trip = browser.evaluate("""(() => { const b = window.lt.map.getBounds();
            return [window.lt.trip.points.length, window.lt.trip.points.every((p) => b.contains(p)), document.getElementById('people-trip').textContent,
                    document.querySelector('path.track-line').getAttribute('stroke')]; })()""")
        check(trip[0] == 15 and trip[1] and "15 locations" in trip[2] and "travelled" in trip[2] and trip[3] == fills[0],
              f"an analyst's view of one person's day as a route in their colour, fitted: {trip[2]}")
        browser.evaluate("document.getElementById('person-bob').click()")
        browser.wait("document.querySelectorAll('path.person').length === 1", what="bob hidden")
        check(True, "a person's box hides and shows their layer")
        browser.pump(1)
        browser.screenshot(os.path.join(options.artifacts, "people-trip.png"))
        browser.evaluate("document.getElementById('person-bob').click()")
        # The same on a phone: map above the list, everyone in view, every control 44 px tall.
        browser.set_viewport(390, 844, mobile=True)
        browser.evaluate("document.querySelector('#views [data-view=people]').click()")
        browser.wait("document.querySelectorAll('path.person').length === 2", what="the people on a phone")
        browser.pump(0.5)
        phone = browser.evaluate("""(() => { const b = window.lt.map.getBounds(); const m = document.getElementById('map').getBoundingClientRect();
            const small = [...document.querySelectorAll('button, a.button, select')].filter((e) => e.offsetParent !== null && e.getBoundingClientRect().height < 44)
                .map((e) => e.textContent.trim() || e.getAttribute('aria-label'));
            return [window.lt.people.every((p) => b.contains([p.last.lat, p.last.lon])), m.width <= 390, small]; })()""")
        check(phone[0] and phone[1] and not phone[2], f"People on a phone: everyone in view, targets of 44 px {phone[2] or ''}")
        browser.screenshot(os.path.join(options.artifacts, "people-phone.png"))
        check.accessible(browser.evaluate, "People on a phone")
        browser.set_viewport(1280, 800)
        browser.evaluate("document.querySelector('#views [data-view=places]').click()")
        browser.wait("window.lt.places.length > 0 && window.lt.placeMarkers.size > 0", what="the admin's places")
        markers = browser.evaluate("window.lt.placeMarkers.size")
        listed = browser.evaluate("document.querySelectorAll('#places-list li').length")
        check(markers == len(seeded) == listed == 50, f"place markers: {markers}, listed {listed}, seeded {len(seeded)}")
        browser.pump(0.5)
        shown = browser.evaluate("""(() => { const bounds = window.lt.map.getBounds();
            const inView = window.lt.places.filter(p => bounds.contains([p.geometry.coordinates[1], p.geometry.coordinates[0]])).length;
            const icons = document.querySelectorAll('.leaflet-marker-icon').length;
            const clustered = [...document.querySelectorAll('.marker-cluster span')].reduce((n, s) => n + Number(s.textContent), 0);
            const single = document.querySelectorAll('.leaflet-marker-icon.pin').length;
            return [inView, icons, clustered + single]; })()""")
        check(shown[0] == 50 and shown[1] > 0 and shown[2] == 50, f"all 50 places in view, drawn as {shown[1]} markers and clusters holding {shown[2]}")
        browser.screenshot(os.path.join(options.artifacts, "places.png"))
        check.accessible(browser.evaluate, "Places (admin)")
        # Search as you type, blind to case and accents.
        for query, expected in (("canada", ["Cañada College"]), ("GOLF", sorted(p["name"] for p in seeded if "golf" in p["name"].lower()))):
            browser.evaluate(f"{{ const s = document.getElementById('places-search'); s.value = '{query}'; s.dispatchEvent(new Event('input')); }}")
            shown = browser.evaluate("[...document.querySelectorAll('#places-list li')].filter((li) => !li.hidden).map((li) => li.firstChild.textContent.trim())")
            check(sorted(shown) == expected and str(len(expected)) in browser.evaluate("document.getElementById('places-summary').textContent"),
                  f"searching places for {query!r}: {shown}")
        browser.evaluate("{ const s = document.getElementById('places-search'); s.value = ''; s.dispatchEvent(new Event('input')); }")

        # Places edited by the admin in the page: added with the form, renamed, deleted; a GeoJSON file imported.
        browser.evaluate("""(() => { document.getElementById('place-name').value = 'Test Café';
            document.getElementById('place-lat').value = '37.5'; document.getElementById('place-lon').value = '-122.25';
            document.getElementById('place-form').requestSubmit(); })()""")
        browser.wait("window.lt.places.length === 51 && window.lt.places.some(p => p.name === 'Test Café')", what="the added place")
        browser.evaluate("document.querySelector('#places-list li button[aria-label=\"Edit Test Café\"]').click()")
        browser.evaluate("document.getElementById('place-name').value = 'Test Café (renamed)'; document.getElementById('place-form').requestSubmit()")
        browser.wait("window.lt.places.some(p => p.name === 'Test Café (renamed)') && window.lt.places.length === 51", what="the renamed place")
        browser.evaluate("document.querySelector('#places-list li button[aria-label=\"Delete Test Café (renamed)\"]').click()")
        browser.wait("window.lt.places.length === 50 && !window.lt.places.some(p => p.name.startsWith('Test Café'))", what="the deleted place")
        check(True, "the admin adds, renames and deletes a place in the page")
        upload_directory = tempfile.TemporaryDirectory(prefix="lt-upload-")  # removed when the test ends
        upload = os.path.join(upload_directory.name, "art.geojson")
        with open(upload, "w") as out:
            json.dump({"type": "FeatureCollection", "features": [
                {"type": "Feature", "properties": {"name": f"Sculpture {i}"}, "geometry": {"type": "Point", "coordinates": [-122.4 + i * 0.01, 37.7]}}
                for i in range(3)]}, out)
        document = browser.call("DOM.getDocument")["root"]["nodeId"]
        node = browser.call("DOM.querySelector", nodeId=document, selector="#place-import")["nodeId"]
        browser.call("DOM.setFileInputFiles", files=[upload], nodeId=node)
        browser.wait("window.lt.places.length === 53 && document.getElementById('place-error').textContent === '3 places imported.'", what="the imported places")
        check(True, "a GeoJSON file of 3 places imported in the page")
        _, release = request("GET", f"{server.app}/api/places/version")
        check(release["dataVersion"] >= 7, f"each change bumped the places release (now {release['dataVersion']})")

        # The correction: on a map with both positions and the distance; approved; the place moves.
        browser.evaluate("document.querySelector('#views [data-view=review]').click()")
        browser.wait("document.querySelectorAll('#review-list li').length === 1", what="one correction to review")
        shown = browser.evaluate("document.querySelector('#review-list li').textContent")
        check(shown.startswith(target["name"]) and re.search(r"moved \d+ m by alice", shown), f"the correction shows the place and the distance: {shown[:80]}")
        labels = browser.evaluate("[...document.querySelectorAll('.pin-label')].map((l) => l.textContent)")
        check(labels == ["A: now", "B: reported"] and not browser.evaluate("document.getElementById('review-legend').hidden"),
              f"A and B labelled on the map, and a legend: {labels}")
        summary = browser.evaluate("document.getElementById('review-summary').textContent")
        check(summary == "1 correction waits for review.", f"one correction, said in the singular: {summary}")
        check(browser.evaluate("document.querySelectorAll('.leaflet-marker-icon.pin').length") == 2, "original and reported positions on the map")
        browser.screenshot(os.path.join(options.artifacts, "review.png"))
        check.accessible(browser.evaluate, "Corrections")
        browser.evaluate("document.querySelector('#review-list li button[aria-label^=Approve]').click()")
        browser.wait("document.getElementById('review-summary').textContent.startsWith('Approved')", what="the approval")
        # Decisions are listed, and can be undone: the place goes back, the report waits again.
        browser.wait("document.querySelectorAll('#review-history li button').length === 1", what="the decision in the history")
        browser.evaluate("document.querySelector('#review-history li button').click()")
        browser.wait("document.getElementById('review-summary').textContent.startsWith('Undone') && document.querySelectorAll('#review-list li').length === 1",
                     what="the undo")
        _, back = request("GET", f"{server.db}/lt_places/{target['_id']}", auth=ADMIN)
        check(back["geometry"] == target["geometry"], "undoing the approval put the place back where it was")
        browser.evaluate("document.querySelector('#review-list li button[aria-label^=Approve]').click()")
        browser.wait("document.getElementById('review-summary').textContent.startsWith('Approved')", what="the approval again")
        browser.evaluate("document.querySelector('#views [data-view=places]').click()")
        browser.wait(f"window.lt.placeMarkers.get('{target['_id']}') && Math.abs(window.lt.placeMarkers.get('{target['_id']}').getLatLng().lat - {moved_to[0]}) < 1e-9",
                     what="the place at its corrected position")
        check(True, "approving the correction moved the place on the map")
        browser.evaluate(f"window.lt.places.filter(p => p._id === '{target['_id']}').forEach(p => focusPlace(p))")
        browser.pump(1)
        browser.screenshot(os.path.join(options.artifacts, "place-moved.png"))

        # Everyone's locations on the map: counted by the server, drawn as points when few.
        browser.evaluate("document.querySelector('#views [data-view=analysis]').click()")
        browser.wait("window.lt.grid && window.lt.grid.total === 20", what="all 20 locations counted", timeout=30)
        browser.wait("document.querySelectorAll('path.leaflet-interactive').length === 20", what="20 points drawn")
        fitted = browser.evaluate("""(() => { const b = window.lt.map.getBounds();
            return window.lt.grid.points.length === 20 && window.lt.grid.points.every(([lat, lon]) => b.contains([lat, lon])); })()""")
        check(fitted, "everyone's locations on the map: fitted on open, 20 counted, 20 drawn, all in view")
        browser.wait("document.getElementById('consolidation-status').textContent.includes('nothing left to gather.')",
                     what="the gathering status")
        check(True, "admins see the consolidation status: " + browser.evaluate("document.getElementById('consolidation-status').textContent"))
        browser.screenshot(os.path.join(options.artifacts, "all-locations-map.png"))
        browser.evaluate("document.getElementById('analysis-heat').click()")
        browser.wait("window.lt.grid && document.querySelectorAll('path.leaflet-interactive').length === window.lt.grid.cells.length",
                     what="the heat map's cells")
        legend = browser.evaluate("document.getElementById('heat-legend').hidden ? '' : document.getElementById('heat-legend').textContent")
        check("locations per square: 1 (light) to" in legend, f"the heat map draws one cell per non-empty grid cell, with a legend: {legend.strip()}")
        browser.screenshot(os.path.join(options.artifacts, "heat-map.png"))
        browser.evaluate("document.getElementById('analysis-heat').click()")
        browser.wait("document.getElementById('export-gpx').href.includes('format=gpx')", what="export links")
        browser.evaluate("document.getElementById('analysis-user').value = 'alice'; document.getElementById('analysis-filter').dispatchEvent(new Event('change'))")
        browser.wait("document.getElementById('analysis-stats').textContent.includes('15 locations')", what="alice's statistics")
        browser.wait("window.lt.grid && window.lt.grid.total === 15 && document.getElementById('analysis-count').textContent.startsWith('15 ')",
                     what="the map filtered to alice")
        alice_fit = browser.evaluate("""(() => { const b = window.lt.map.getBounds();
            return [window.lt.grid.points.length, window.lt.grid.points.every(([lat, lon]) => b.contains([lat, lon])), window.lt.map.getZoom()]; })()""")
        check(alice_fit[0] == 15 and alice_fit[1] and alice_fit[2] >= 12, f"filtered to one user: hers only, the map fitted to them (zoom {alice_fit[2]})")
        geojson = browser.evaluate("fetch(document.getElementById('export-geojson').href).then(r => r.json())")
        gpx = browser.evaluate("fetch(document.getElementById('export-gpx').href).then(r => r.text())")
        disposition = browser.evaluate("fetch(document.getElementById('export-csv').href).then(r => r.headers.get('Content-Disposition'))")
        check(disposition and 'filename="locations-alice' in disposition and disposition.endswith('.csv"'), f"a download is named for whose locations and its format: {disposition}")
        check(len(geojson["features"]) == 15 and gpx.count("<trkpt ") == 15, f"exports of alice's locations: {len(geojson['features'])} features, {gpx.count('<trkpt ')} GPX points")
        browser.screenshot(os.path.join(options.artifacts, "all-locations.png"))
        check.accessible(browser.evaluate, "All locations")
        browser.set_viewport(390, 844, mobile=True)
        browser.evaluate("document.getElementById('analysis-user').value = ''; document.getElementById('analysis-filter').dispatchEvent(new Event('change'))")
        browser.wait("window.lt.grid && window.lt.grid.total === 20", what="everyone again, on a phone")
        browser.pump(0.5)
        fits = browser.evaluate("""(() => { const b = window.lt.map.getBounds();
            return window.lt.grid.points.length === 20 && window.lt.grid.points.every(([lat, lon]) => b.contains([lat, lon])); })()""")
        check(fits, "all locations on a phone: the map fitted to every one of them")
        browser.screenshot(os.path.join(options.artifacts, "all-locations-phone.png"))
        check.accessible(browser.evaluate, "All locations on a phone")
        browser.set_viewport(1280, 800)

        # The admin sees everyone's photos (consolidated with their attachments).
        browser.evaluate("document.querySelector('#views [data-view=photos]').click()")
        browser.wait("document.querySelectorAll('#photos-list img').length === 2 && [...document.querySelectorAll('#photos-list img')].every(i => i.complete && i.naturalWidth === 4)",
                     what="everyone's photos for the admin", timeout=30)
        check(True, "the admin sees the photos in lt_locations_all")

        browser.pump(0.5)
        check(not browser.errors, "no console errors" + ("" if not browser.errors else ": " + "; ".join(browser.errors[:5])))

        # Tiles that cannot be loaded (here: nothing listens on port 9) are said so on the map,
        # not left as a grey background. (Last: the failed loads are console errors.)
        browser.evaluate("void window.lt.addTiles('http://127.0.0.1:9/{z}/{x}/{y}.png')")
        browser.wait("!document.getElementById('map-note').hidden", what="the note about unreachable tiles")
        note = browser.evaluate("document.getElementById('map-note').textContent")
        check("127.0.0.1:9" in note and "cannot be loaded" in note and browser.evaluate("document.getElementById('map-note').getAttribute('role')") == "status",
              f"unreachable tiles are explained on the map: {note[:90]}")
        browser.screenshot(os.path.join(options.artifacts, "tiles-unreachable.png"))
        # The note can be dismissed (on a phone it covers much of the map), and stays dismissed.
        browser.evaluate("document.querySelector('#map-note .map-note-dismiss').click()")
        browser.evaluate("void window.lt.addTiles('http://127.0.0.1:9/{z}/{x}/{y}.png?again')")
        browser.pump(1.5)
        check(browser.evaluate("document.getElementById('map-note').hidden"), "the note's × dismisses it, and the same cause does not bring it back")

        # A user's own account page: devices revoked, the password changed, the account deleted.
        # (After the console-error check: wrong passwords tried here are 401s the console reports.)
        assert request("PUT", f"{server.app}/api/users/carol", {"password": "pw-carol"})[0] == 201
        status, carol = request("POST", f"{server.app}/api/login", {"username": "carol", "password": "pw-carol", "device": "Carol's phone"})
        assert status == 200
        carol_key = (carol["api_key"], carol["api_password"])
        doc = location(0, "carol", 48.85, 2.35)
        assert request("PUT", f"{server.db}/lt_locations_user_carol/{doc['_id']}", doc, carol_key)[0] == 201
        browser.evaluate("document.getElementById('sign-out').click()")
        browser.wait("!document.getElementById('sign-in').hidden && !window.lt.session", what="the admin signed out")
        def sign_in(name, password):
            browser.evaluate(f"""(() => {{ document.getElementById('username').value = '{name}';
                document.getElementById('password').value = '{password}'; document.getElementById('sign-in-form').requestSubmit(); }})()""")
        sign_in("carol", "pw-carol")
        browser.wait("window.lt.session && window.lt.session.name === 'carol'", what="carol signed in")
        browser.evaluate("document.querySelector('#views [data-view=account]').click()")
        browser.wait("document.querySelectorAll('#devices-list li[data-key]').length === 1", what="carol's device")
        device = browser.evaluate("document.querySelector('#devices-list li').textContent")
        explained = browser.evaluate("document.getElementById('delete-explained').textContent")
        check(device.startswith("Carol's phone, signed in") and "Copies gathered for analysis stay" in explained,
              f"the account page lists the devices and says what deleting does: {device[:40]} / {explained[:70]}")
        browser.screenshot(os.path.join(options.artifacts, "account.png"))
        check.accessible(browser.evaluate, "Account")
        # A history imported from the account page, streamed from the browser: stored under carol's
        # ids, the page says how many, its bar full; the same file again stores none.
        records = {"locations": [{"latitudeE7": 488500000 + i * 1000, "longitudeE7": 23500000 + i * 700, "accuracy": 10 + i % 7,
                                  "timestamp": f"2024-05-01T{8 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z"} for i in range(3000)]}
        records["locations"].insert(7, {"timestamp": "2024-05-01T00:00:00Z"})  # no position: skipped, with its reason
        text = json.dumps(records, indent=2)
        def upload():
            browser.evaluate(f"""(() => {{ const transfer = new DataTransfer();
                transfer.items.add(new File([{json.dumps(text)}], 'Records.json', {{ type: 'application/json' }}));
                document.getElementById('import-file').files = transfer.files;
                document.getElementById('import-form').requestSubmit(); }})()""")
        upload()
        browser.wait("document.getElementById('import-status').textContent.includes('(google-records)')", what="the import's result")
        status = browser.evaluate("document.getElementById('import-status').textContent")
        check("3000 locations stored, 0 already there" in status and "1 no latitudeE7/longitudeE7" in status,
              f"the account page imports a Records.json and says what it stored and skipped: {status[:160]}")
        _, imported = request("GET", f"{server.db}/lt_locations_user_carol/_all_docs?start_key=%22imp-%22&end_key=%22imp.%22", auth=ADMIN)
        check(len(imported["rows"]) == 3000, f"the imported locations are carol's: {len(imported['rows'])} in her database")
        check(browser.evaluate("!document.getElementById('import-progress').hidden && document.getElementById('import-progress').value === 1"),
              "the import's bar is shown, full")
        browser.screenshot(os.path.join(options.artifacts, "import.png"))
        upload()
        browser.wait("document.getElementById('import-status').textContent.includes('0 locations stored')", what="the second import's result")
        status = browser.evaluate("document.getElementById('import-status').textContent")
        check("3000 already there" in status, f"the same file again stores nothing: {status[:120]}")
        browser.evaluate("""(() => { const transfer = new DataTransfer();
            transfer.items.add(new File(['just some notes'], 'notes.txt')); document.getElementById('import-file').files = transfer.files;
            document.getElementById('import-form').requestSubmit(); })()""")
        browser.wait("document.getElementById('import-error').textContent.includes('Records.json')", what="a file that is no history refused")
        browser.evaluate("window.confirm = () => true; document.querySelector('#devices-list li button').click()")
        browser.wait("document.querySelectorAll('#devices-list li[data-key]').length === 0", what="the device revoked")
        check(request("GET", f"{server.db}/lt_locations_user_carol", auth=carol_key)[0] == 401, "a revoked device's key stops working at once")
        def change(current, new, again):
            browser.evaluate(f"""(() => {{ document.getElementById('current-password').value = '{current}';
                document.getElementById('new-password').value = '{new}'; document.getElementById('repeat-password').value = '{again}';
                document.getElementById('password-form').requestSubmit(); }})()""")
        change("pw-carol", "new-carol", "other")
        browser.wait("document.getElementById('password-error').textContent.includes('differ')", what="the mismatch")
        change("wrong", "new-carol", "new-carol")
        browser.wait("document.getElementById('password-error').textContent.includes('not right')", what="the wrong current password")
        change("pw-carol", "new-carol", "new-carol")
        browser.wait("!document.getElementById('sign-in').hidden && document.getElementById('sign-in-note').textContent.includes('password is changed')",
                     what="signed out after the change")
        check(request("POST", f"{server.app}/api/login", {"username": "carol", "password": "pw-carol"})[0] == 401, "the password changed: the old one is refused")
        sign_in("carol", "new-carol")
        browser.wait("window.lt.session && window.lt.session.name === 'carol'", what="carol signed in with her new password")
        browser.evaluate("document.querySelector('#views [data-view=account]').click()")
        browser.wait("!document.getElementById('panel-account').hidden", what="the account page")
        browser.evaluate("""(() => { window.confirm = () => true; document.getElementById('delete-purge').checked = true;
            document.getElementById('delete-password').value = 'new-carol'; document.getElementById('delete-form').requestSubmit(); })()""")
        browser.wait("!document.getElementById('sign-in').hidden && document.getElementById('sign-in-note').textContent.includes('carol is deleted')",
                     what="the account deleted")
        gone = request("GET", f"{server.db}/lt_locations_user_carol", auth=ADMIN)[0]
        check(gone == 404 and request("POST", f"{server.app}/api/login", {"username": "carol", "password": "new-carol"})[0] == 401,
              "deleting the account removed carol, her database and her sign-in")
        sign_in("carol", "new-carol")
        browser.wait("document.getElementById('sign-in-error').textContent.includes('incorrect')", what="carol cannot sign in")
    except Exception as error:
        check.failed_with(error, browser)
    finally:
        browser.close()
        server.stop()
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
