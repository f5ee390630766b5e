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
  const STORE_VERSION = 1;

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
        db.createObjectStore('account');
        db.createObjectStore('outbox', { keyPath: '_id' }).createIndex('created_at', 'created_at');
        db.createObjectStore('kept', { keyPath: '_id' }).createIndex('created_at', 'created_at');
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

    // Sign-out: everything of this user goes.
    async wipe() {
      this.db.close();
      await request(indexedDB.deleteDatabase(this.name));
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

  self.ltStore = { LOCATION_POLICY, LocationMonitor, locationDocument, sphereDistance, TrackerStore, newDocumentID };
})();
