// The tracker's local side, without any page: the location filter and document format shared
// with TrackerKit (LocationPolicy.original, LocationDocument: a test checks both are equal),
// and the IndexedDB store — the signed-in account and the outbox of documents not yet sent.
'use strict';

(() => {

  // TrackerKit's LocationPolicy.original (the original iOS client's AppConstants): accuracy and
  // distance limits in metres for the foreground / background, seconds between kept fixes.
  const LOCATION_POLICY = Object.freeze({
    foregroundAccuracy: 25,
    backgroundAccuracy: 100,
    foregroundDistance: 15,
    backgroundDistance: 100,
    minimumInterval: 15,
  });

  // Great-circle distance in metres (haversine, mean Earth radius), as Geo's Sphere.distance.
  function sphereDistance(a, b) {
    const rad = Math.PI / 180, R = 6371008.8;
    const dLat = (b.lat - a.lat) * rad, dLon = (b.lon - a.lon) * rad;
    const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(dLon / 2) ** 2;
    return 2 * R * Math.asin(Math.min(1, Math.sqrt(h)));
  }

  // TrackerKit's LocationMonitor: the accuracy check for the app's state, then the first fix
  // always, later ones only when far enough and long enough after the last one kept.
  // A fix is {lat, lon, accuracy (m), time (ms)}; returns 'accepted' or why not.
  class LocationMonitor {
    constructor(policy = LOCATION_POLICY) { this.policy = policy; this.last = null; }
    consider(fix, inBackground) {
      if (!(fix.accuracy >= 0) || !Number.isFinite(fix.lat) || !Number.isFinite(fix.lon)) return 'invalid';
      if (fix.accuracy > (inBackground ? this.policy.backgroundAccuracy : this.policy.foregroundAccuracy)) return 'inaccurate';
      if (this.last) {
        if (sphereDistance(this.last, fix) < (inBackground ? this.policy.backgroundDistance : this.policy.foregroundDistance)) return 'too_close';
        if (!((fix.time - this.last.time) / 1000 > this.policy.minimumInterval)) return 'too_soon';
      }
      this.last = fix;
      return 'accepted';
    }
    // Back in the foreground: the next fix counts as a first (as the original client).
    resume() { this.last = null; }
  }

  // TrackerKit's LocationDocument: a GeoJSON Feature with created_at (ms) and properties.
  function locationDocument(fix, username, background, sessionID) {
    const properties = { username, timestamp: fix.time, background: Boolean(background) };
    if (sessionID) properties.session_id = sessionID;
    return { type: 'Feature', created_at: fix.time, geometry: { type: 'Point', coordinates: [fix.lon, fix.lat] }, properties };
  }

  // MARK: IndexedDB

  const STORE_NAME = 'lt-tracker';
  const STORE_VERSION = 2;

  function request(r) {
    return new Promise((resolve, reject) => { r.onsuccess = () => resolve(r.result); r.onerror = () => reject(r.error); });
  }

  // The store: `account` (one record: the user, the API key and secret, the database's URL),
  // `outbox` (documents waiting to be sent, in order), `kept` (documents sent, for the map).
  class TrackerStore {
    static async open(name = STORE_NAME) {
      const opening = indexedDB.open(name, STORE_VERSION);
      opening.onupgradeneeded = () => {
        const db = opening.result;
        const has = (store) => db.objectStoreNames.contains(store);
        if (!has('account')) db.createObjectStore('account');
        if (!has('outbox')) db.createObjectStore('outbox', { keyPath: '_id' }).createIndex('created_at', 'created_at');
        if (!has('kept')) db.createObjectStore('kept', { keyPath: '_id' }).createIndex('created_at', 'created_at');
        // Version 2: the places of the device's region, and small state records (the region).
        if (!has('places')) db.createObjectStore('places', { keyPath: '_id' });
        if (!has('state')) db.createObjectStore('state');
      };
      return new TrackerStore(await request(opening), name);
    }

    constructor(db, name) { this.db = db; this.name = name; }

    async run(stores, mode, body) {
      const transaction = this.db.transaction(stores, mode);
      const done = new Promise((resolve, reject) => {
        transaction.oncomplete = resolve;
        transaction.onerror = () => reject(transaction.error);
        transaction.onabort = () => reject(transaction.error || new Error('transaction aborted'));
      });
      const result = await body(transaction);
      await done;
      return result;
    }

    account() { return this.run(['account'], 'readonly', (t) => request(t.objectStore('account').get('me'))); }
    saveAccount(account) { return this.run(['account'], 'readwrite', (t) => request(t.objectStore('account').put(account, 'me'))); }

    // Queues documents (each with its _id) to be sent.
    enqueue(docs) {
      return this.run(['outbox'], 'readwrite', async (t) => { for (const doc of docs) t.objectStore('outbox').put(doc); });
    }

    pending(limit = 500) {
      return this.run(['outbox'], 'readonly', (t) => request(t.objectStore('outbox').index('created_at').getAll(null, limit)));
    }

    pendingCount() { return this.run(['outbox'], 'readonly', (t) => request(t.objectStore('outbox').count())); }

    // The documents the server took: out of the outbox, into what the map shows.
    sent(docs) {
      return this.run(['outbox', 'kept'], 'readwrite', async (t) => {
        for (const doc of docs) { t.objectStore('outbox').delete(doc._id); t.objectStore('kept').put(doc); }
      });
    }

    kept() { return this.run(['kept'], 'readonly', (t) => request(t.objectStore('kept').index('created_at').getAll())); }

    // Documents the server holds (restored after signing in), kept for the map: only location
    // documents (a time and a point), as sent ones.
    remember(docs) {
      const usable = docs.filter((doc) => doc && typeof doc._id === 'string' && typeof doc.created_at === 'number'
        && doc.geometry && Array.isArray(doc.geometry.coordinates));
      return this.run(['kept'], 'readwrite', async (t) => { for (const doc of usable) t.objectStore('kept').put(doc); });
    }

    // Removes the sent documents older than `before` (ms) from the phone (never the outbox); how many.
    pruneKept(before) {
      return this.run(['kept'], 'readwrite', async (t) => {
        const index = t.objectStore('kept').index('created_at');
        const keys = await request(index.getAllKeys(IDBKeyRange.upperBound(before, true)));
        for (const key of keys) t.objectStore('kept').delete(key);
        return keys.length;
      });
    }

    state(key) { return this.run(['state'], 'readonly', (t) => request(t.objectStore('state').get(key))); }
    setState(key, value) { return this.run(['state'], 'readwrite', (t) => request(t.objectStore('state').put(value, key))); }

    // The region's places in place of the device's copy, with the region that holds them.
    replacePlaces(places, region) {
      return this.run(['places', 'state'], 'readwrite', async (t) => {
        const store = t.objectStore('places');
        store.clear();
        for (const place of places) store.put(place);
        t.objectStore('state').put(region, 'places-region');
      });
    }

    places() { return this.run(['places'], 'readonly', (t) => request(t.objectStore('places').getAll())); }

    // Sign-out: everything of this user goes.
    async wipe() {
      this.db.close();
      await request(indexedDB.deleteDatabase(this.name));
    }
  }

  // TrackerKit's PlacesCache: the places within 25 km of the device kept on it, pulled again when
  // the device is past half of that, or the server's places release changed (asked at most
  // every 5 minutes); "places near me" (2.5 miles, nearest first) answered from the copy, and
  // complete when the position is well inside the region.
  class PlacesCache {
    constructor(store, { regionRadius = 25000, queryRadius = 2.5 * 1609.34, releaseCheckInterval = 300000 } = {}) {
      Object.assign(this, { store, regionRadius, queryRadius, releaseCheckInterval });
      this.releaseCheckedAt = null;
      this.pulls = 0;
    }

    async load() {
      this.region = (await this.store.state('places-region')) || null;
      this.placesHeld = await this.store.places();
      return this;
    }

    covers(position) {
      return Boolean(this.region) && sphereDistance(this.region, position) + this.queryRadius <= this.region.radius;
    }

    // Online upkeep; `getJSON(path)` asks the application API. Returns whether it pulled.
    async refresh(position, getJSON, now = Date.now()) {
      let release = this.region ? this.region.release : null;
      if (!this.region || this.releaseCheckedAt === null || now - this.releaseCheckedAt >= this.releaseCheckInterval) {
        release = (await getJSON('/api/places/version')).dataVersion || 0;
        this.releaseCheckedAt = now;
      }
      if (this.region && this.region.release === release && sphereDistance(this.region, position) <= this.region.radius / 2) return false;
      const places = [];
      let bookmark = null;
      do {
        const query = new URLSearchParams({ lat: position.lat, lon: position.lon, radius: this.regionRadius, relation: 'contains',
          nearest: 'true', include_docs: 'true', limit: '200' });
        if (bookmark) query.set('bookmark', bookmark);
        const page = await getJSON(`/api/places?${query}`);
        const rows = page.rows || [];
        for (const row of rows) if (row.doc) places.push(row.doc);
        bookmark = rows.length >= 200 && page.bookmark ? page.bookmark : null;
      } while (bookmark);
      const region = { lat: position.lat, lon: position.lon, radius: this.regionRadius, release };
      await this.store.replacePlaces(places, region);
      this.region = region;
      this.placesHeld = places;
      this.pulls += 1;
      return true;
    }

    // The places within the query radius of `position`, nearest first: [{place, distance}].
    near(position, limit = 100) {
      const found = [];
      for (const place of this.placesHeld || []) {
        const c = place.geometry && place.geometry.coordinates;
        if (!c) continue;
        const distance = sphereDistance(position, { lat: c[1], lon: c[0] });
        if (distance <= this.queryRadius) found.push({ place, distance });
      }
      found.sort((a, b) => a.distance - b.distance);
      return { places: found.slice(0, limit), complete: this.covers(position) };
    }
  }

  // A document id as TrackerKit makes them: a lowercase UUID.
  function newDocumentID() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const hex = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  self.ltStore = { LOCATION_POLICY, LocationMonitor, locationDocument, sphereDistance, TrackerStore, PlacesCache, newDocumentID };
})();
