#!/usr/bin/env python3
"""An independent reading of a location history file, for the importer's tests: the same
formats read with Python's standard library (json, csv, xml.etree, datetime), written without
looking at the Swift reader. Prints a JSON list of [time_ms, lat, lon, accuracy] in file order.

usage: read_history.py FORMAT FILE
"""
import csv
import json
import re
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone


def iso_ms(text):
    text = text.strip()
    if text.endswith("Z") or text.endswith("z"):
        text = text[:-1] + "+00:00"
    # Python before 3.11 takes at most 6 fraction digits and needs a colon in the offset.
    m = re.match(r"^(.*?)(\.\d+)?([+-]\d\d:?\d\d)?$", text)
    base, frac, off = m.group(1), m.group(2) or "", m.group(3) or ""
    if off and ":" not in off:
        off = off[:3] + ":" + off[3:]
    micro = (frac[1:] + "000000")[:6] if frac else "000000"
    dt = datetime.fromisoformat(base + "." + micro + off)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    delta = dt - epoch
    return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000


def num(value):
    if value is None:
        return None
    return float(value)


def latlng(text):
    if isinstance(text, dict):
        text = text.get("latLng") or text.get("LatLng")
    text = text.replace("geo:", "").replace("°", "")
    lat, lon = [float(part.strip()) for part in text.split(",")]
    return lat, lon


def records(path):
    out = []
    for loc in json.load(open(path, encoding="utf-8"))["locations"]:
        if "latitudeE7" not in loc:
            continue
        t = iso_ms(loc["timestamp"]) if "timestamp" in loc else int(loc["timestampMs"])
        out.append([t, loc["latitudeE7"] / 1e7, loc["longitudeE7"] / 1e7, num(loc.get("accuracy"))])
    return out


def segments(items):
    out = []
    for seg in items:
        if "timelinePath" in seg:
            start = iso_ms(seg["startTime"])
            for p in seg["timelinePath"]:
                lat, lon = latlng(p["point"])
                t = iso_ms(p["time"]) if "time" in p else start + int(float(p["durationMinutesOffsetFromStartTime"]) * 60000)
                out.append([t, lat, lon, None])
        elif "activity" in seg:
            a = seg["activity"]
            for key, tkey in (("start", "startTime"), ("end", "endTime")):
                lat, lon = latlng(a[key])
                out.append([iso_ms(seg[tkey]), lat, lon, None])
    return out


def android(path):
    doc = json.load(open(path, encoding="utf-8"))
    out = segments(doc.get("semanticSegments", []))
    for signal in doc.get("rawSignals", []):
        if "position" in signal:
            p = signal["position"]
            lat, lon = latlng(p["LatLng"])
            out.append([iso_ms(p["timestamp"]), lat, lon, num(p.get("accuracyMeters"))])
    return out


def owntracks(messages):
    return [[int(round(float(m["tst"]) * 1000)), float(m["lat"]), float(m["lon"]), num(m.get("acc"))]
            for m in messages if m.get("_type") == "location"]


def owntracks_json(path):
    doc = json.load(open(path, encoding="utf-8"))
    if isinstance(doc, dict):
        doc = doc.get("data", [doc])
    return owntracks(doc)


def owntracks_rec(path):
    messages = []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            messages.append(json.loads(line.split("\t", 2)[2]))
    return owntracks(messages)


def gpx(path):
    out = []
    for el in ET.parse(path).getroot().iter():
        tag = el.tag.split("}")[-1]
        if tag in ("trkpt", "rtept", "wpt"):
            time = [c for c in el if c.tag.split("}")[-1] == "time"]
            hdop = [c for c in el if c.tag.split("}")[-1] == "hdop"]
            if time:
                out.append([iso_ms(time[0].text), float(el.get("lat")), float(el.get("lon")),
                            float(hdop[0].text) * 5 if hdop else None])
    return out


def geojson(path):
    out = []
    for f in json.load(open(path, encoding="utf-8"))["features"]:
        g, props = f.get("geometry"), f.get("properties") or {}
        if not g or g["type"] not in ("Point", "LineString"):
            continue
        if g["type"] == "Point":
            t = props["time"]
            t = iso_ms(t) if isinstance(t, str) else int(t)
            out.append([t, g["coordinates"][1], g["coordinates"][0], num(props.get("accuracy"))])
        else:
            for c, t in zip(g["coordinates"], props["coordTimes"]):
                out.append([iso_ms(t), c[1], c[0], None])
    return out


def csv_file(path):
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        sample = f.readline()
        f.seek(0)
        delimiter = max([",", ";", "\t"], key=sample.count)
        for row in csv.DictReader(f, delimiter=delimiter):
            t = row["time"]
            try:
                n = float(t)
                t = int(round(n * 1000 if n < 1e11 else n))
            except ValueError:
                try:
                    t = iso_ms(t)
                except ValueError:
                    continue  # a row without a time holds no location
            out.append([t, float(row["latitude"]), float(row["longitude"]),
                        float(row["accuracy"]) if row.get("accuracy") else None])
    return out


def semantic(path):
    def t(d, name):
        return iso_ms(d[name]) if name in d else int(d[name + "Ms"])
    out = []
    for obj in json.load(open(path, encoding="utf-8"))["timelineObjects"]:
        seg = obj.get("activitySegment")
        if not seg:
            continue
        d = seg["duration"]
        out.append([t(d, "startTimestamp"), seg["startLocation"]["latitudeE7"] / 1e7,
                    seg["startLocation"]["longitudeE7"] / 1e7, None])
        for p in seg.get("simplifiedRawPath", {}).get("points", []):
            out.append([t(p, "timestamp"), p["latE7"] / 1e7, p["lngE7"] / 1e7, num(p.get("accuracyMeters"))])
        out.append([t(d, "endTimestamp"), seg["endLocation"]["latitudeE7"] / 1e7,
                    seg["endLocation"]["longitudeE7"] / 1e7, None])
    return out


READERS = {
    "google-semantic": semantic,
    "google-records": records, "android-timeline": android,
    "ios-timeline": lambda p: segments(json.load(open(p, encoding="utf-8"))),
    "owntracks-json": owntracks_json, "owntracks-rec": owntracks_rec, "gpx": gpx, "geojson": geojson,
    "csv": csv_file,
}

if __name__ == "__main__":
    print(json.dumps(READERS[sys.argv[1]](sys.argv[2])))
