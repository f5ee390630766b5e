// The tracker app: sign in or register against the application API, track with the
// Geolocation API through TrackerKit's filter, keep every kept fix in IndexedDB's outbox and
// send the outbox to the user's own database with `_bulk_docs` whenever there is a network.
// Plain JavaScript, no build step; text from the server is put into the page as text only.
'use strict';

const { LOCATION_POLICY, LocationMonitor, locationDocument, TrackerStore, PlacesCache, newDocumentID } = self.ltStore;
const $ = (id) => document.getElementById(id);

const app = {
  store: null,
  account: null,     // {username, apiKey, apiSecret, database, databaseURL}
  monitor: new LocationMonitor(),
  watch: null,       // the watchPosition id while tracking
  sessionID: null,   // one per tracking session, as TrackerKit's
  lastFix: null,
  syncing: null,     // the sync under way (a promise), if any
  retry: null,       // the timer of the next attempt after a failure
  failures: 0,
  places: null,      // the PlacesCache
  view: 'status',
  map: null,         // Leaflet's map, once the Map view was shown
  lastSync: null,    // when the outbox was last sent whole (ms)
  reachable: null,   // whether the server answered the last attempt (null: not tried yet)
  signOutWhenSent: false,  // the user chose to sign out once the outbox is sent
  photoURLs: new Map(),    // photos kept on the server, fetched once: document id → object URL
};
window.ltApp = app;  // for the browser tests

async function api(method, path, body) {
  const response = await fetch(path, {
    method, headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let json = null;
  try { json = await response.json(); } catch (e) { json = null; }
  if (!response.ok) {
    const error = new Error((json && (json.reason || json.error)) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return json;
}

// MARK: Account

// The per-device API key of `POST /api/login` (as `lt device` gets one), kept for offline starts.
async function signIn(username, password) {
  const login = await api('POST', '/api/login', { username, password });
  const scheme = login.location_db_host_protocol || 'http';
  app.account = {
    username, apiKey: login.api_key, apiSecret: login.api_password, database: login.location_db_name,
    databaseURL: `${scheme}://${login.location_db_host}/${encodeURIComponent(login.location_db_name)}`,
  };
  await app.store.saveAccount(app.account);
  await loadSettings();
  showTracker();
  await restoreHistory().catch((error) => console.warn('history not restored:', error));
}

// After signing in (again) on this phone: my newest locations and photos from the server, so
// the map shows my history, not an empty page (what waits in the outbox stays as it is).
const HISTORY_LIMIT = 2000;
async function restoreHistory() {
  const response = await fetch(`/api/me/locations?limit=${HISTORY_LIMIT}`, { headers: { Accept: 'application/json', Authorization: authorizationOf(app.account) } });
  if (!response.ok) throw new Error(`the server answered ${response.status}`);
  const { locations } = await response.json();
  await app.store.remember(locations || []);
  if (app.view === 'map') await showMap();
}

const authorizationOf = (account) => 'Basic ' + btoa(`${account.apiKey}:${account.apiSecret}`);

async function register(username, password) {
  await api('PUT', `/api/users/${encodeURIComponent(username)}`, { password });
  await signIn(username, password);
}

// Signing out removes this phone's copy of the account, so locations not sent yet would be
// lost: they are sent first; what the network does not take now is never deleted without the
// user's word (the count said), and they may sign out once it is sent instead.
async function requestSignOut() {
  let waiting = await app.store.pendingCount();
  if (waiting > 0) {
    $('sign-out').disabled = true;
    $('sync-note').textContent = `Sending ${waiting} waiting location${waiting === 1 ? '' : 's'} before signing out…`;
    try { await sync(); } finally { $('sign-out').disabled = false; }
    waiting = await app.store.pendingCount();
  }
  if (waiting === 0) return signOut();
  const where = !navigator.onLine ? 'there is no network'
    : app.reachable ? `the server did not take ${waiting === 1 ? 'it' : 'them'} (${$('tracker-error').textContent || 'see above'})` : 'the server cannot be reached';
  $('sign-out-text').textContent = `${waiting} location${waiting === 1 ? ' (or photo) is' : 's (or photos) are'} kept on this phone and not sent yet, `
    + `because ${where}. Signing out now deletes ${waiting === 1 ? 'it' : 'them'} for good.`;
  $('sign-out-dialog').showModal();
  $('sign-out-later').focus();
}

function signOutOnceSent() {
  $('sign-out-dialog').close();
  stopTracking();
  rememberSignOutWhenSent(true);
  showSyncNote();
  sync();
}

// The choice to sign out once everything is sent, kept on the phone: closing the app before the
// network comes back neither forgets it nor signs out with something unsent.
function rememberSignOutWhenSent(value) {
  app.signOutWhenSent = value;
  if (app.store) app.store.setState('sign-out-when-sent', value).catch((error) => console.warn('not kept:', error));
}

async function signOut() {
  $('sign-out-dialog').close();
  app.signOutWhenSent = false;
  stopTracking();
  clearTimeout(app.retry);
  if (app.syncing) await app.syncing.catch(() => {});
  await app.store.wipe();
  for (const url of app.photoURLs.values()) URL.revokeObjectURL(url);
  app.photoURLs.clear();
  Object.assign(app, { lastFix: null, lastSync: null, reachable: null });
  $('last-fix').textContent = 'none yet';
  $('last-sync').textContent = 'never';
  $('sync-note').textContent = '';
  $('tracker-error').textContent = '';
  app.account = null;
  app.store = await TrackerStore.open();
  app.places = await new PlacesCache(app.store).load();
  $('tracker').hidden = true;
  $('welcome').hidden = false;
}

// MARK: Tracking

function startTracking() {
  if (!navigator.geolocation) { $('tracker-error').textContent = 'This browser cannot tell its position.'; return; }
  app.sessionID = newDocumentID();
  app.monitor.resume();
  app.watch = navigator.geolocation.watchPosition(onPosition, onPositionError, { enableHighAccuracy: app.settings.precise, maximumAge: 0, timeout: 60000 });
  $('tracking').textContent = 'Stop tracking';
  $('tracking').setAttribute('aria-pressed', 'true');
  saveStatus();
}

function stopTracking() {
  if (app.watch !== null) navigator.geolocation.clearWatch(app.watch);
  app.watch = null;
  $('tracking').textContent = 'Start tracking';
  $('tracking').setAttribute('aria-pressed', 'false');
  saveStatus();
}

// MARK: Tracking settings

// The original client's rules (TrackerKit's LocationPolicy.original), precise positions, and a
// year of sent locations kept on the phone.
const DEFAULT_SETTINGS = Object.freeze({
  minimumInterval: LOCATION_POLICY.minimumInterval, foregroundDistance: LOCATION_POLICY.foregroundDistance,
  foregroundAccuracy: LOCATION_POLICY.foregroundAccuracy, precise: true, keepDays: 365,
});
app.settings = Object.assign({}, DEFAULT_SETTINGS);

// The settings kept on this phone, in the filter and the form; sent locations older than kept removed.
async function loadSettings() {
  app.settings = Object.assign({}, DEFAULT_SETTINGS, (await app.store.state('settings')) || {});
  applySettings();
  await app.store.pruneKept(Date.now() - app.settings.keepDays * 86400000);
}

// The filter takes the chosen interval, distance and accuracy (the background limits never
// stricter than the foreground's); the form shows what is in force.
function applySettings() {
  const s = app.settings;
  app.monitor.policy = Object.freeze(Object.assign({}, LOCATION_POLICY, {
    minimumInterval: s.minimumInterval, foregroundDistance: s.foregroundDistance, foregroundAccuracy: s.foregroundAccuracy,
    backgroundDistance: Math.max(LOCATION_POLICY.backgroundDistance, s.foregroundDistance),
    backgroundAccuracy: Math.max(LOCATION_POLICY.backgroundAccuracy, s.foregroundAccuracy),
  }));
  $('setting-interval').value = s.minimumInterval;
  $('setting-distance').value = s.foregroundDistance;
  $('setting-accuracy').value = s.foregroundAccuracy;
  $('setting-precise').checked = s.precise;
  $('setting-keep').value = s.keepDays;
}

async function saveSettings(settings) {
  app.settings = settings;
  await app.store.setState('settings', settings);
  applySettings();
  const removed = await app.store.pruneKept(Date.now() - settings.keepDays * 86400000);
  // Tracking picks up "precise" only when it starts: started again if on.
  if (app.watch !== null) { navigator.geolocation.clearWatch(app.watch); app.watch = null; startTracking(); }
  $('settings-note').textContent = `Saved: a location at most every ${settings.minimumInterval} s, after ${formatDistance(settings.foregroundDistance)}, `
    + `none less precise than ${formatDistance(settings.foregroundAccuracy)}; sent locations kept here ${settings.keepDays} days`
    + (removed ? ` (${removed} older removed from this phone; the server still has them).` : '.');
  if (removed) await showPending();
}

function setUpSettings() {
  $('settings-form').addEventListener('submit', (event) => {
    event.preventDefault();
    if (!$('settings-form').reportValidity()) return;
    saveSettings({
      minimumInterval: Number($('setting-interval').value), foregroundDistance: Number($('setting-distance').value),
      foregroundAccuracy: Number($('setting-accuracy').value), precise: $('setting-precise').checked, keepDays: Number($('setting-keep').value),
    }).catch(report);
  });
  $('settings-reset').addEventListener('click', () => { saveSettings(Object.assign({}, DEFAULT_SETTINGS)).catch(report); });
}

// MARK: History import

// A history file sent to the server with this phone's key (import-history.js does the rest).
function importHistory() {
  const file = $('import-file').files[0];
  if (!file || !app.account) return;
  if (!navigator.onLine) { $('import-error').textContent = 'Importing needs the server: try again when there is a network.'; return; }
  self.ltImportHistory(file, {
    headers: { Authorization: authorizationOf(app.account) }, bar: $('import-progress'), status: $('import-status'),
    error: $('import-error'), button: $('import-form').querySelector('button'),
  });
}

// What the Tracking screen says, kept across closing and reopening the app: the last fix, the
// last sync and whether tracking was on (it starts again when the app reopens).
function saveStatus() {
  if (!app.store || !app.account) return;
  app.store.setState('status', { lastFix: app.lastFix, lastSync: app.lastSync, tracking: app.watch !== null })
    .catch((error) => console.warn('status not kept:', error));
}

async function restoreStatus() {
  const status = await app.store.state('status');
  if (!status) return;
  app.lastSync = status.lastSync || null;
  if (status.lastFix) showFix(app.lastFix = status.lastFix);
  if (app.lastSync) $('last-sync').textContent = describeTime(app.lastSync);
  if (status.tracking && navigator.geolocation) {
    startTracking();
    // Going on from the last fix kept: the same spot again right after reopening is no new point.
    if (status.lastFix) app.monitor.last = status.lastFix;
    $('tracking-note').textContent = 'Tracking started again when the app opened. It runs while this app is open.';
  }
}

// A time as a person reads it: the time today, else the day and time.
function describeTime(ms) {
  const date = new Date(ms);
  return date.toDateString() === new Date().toDateString() ? date.toLocaleTimeString() : date.toLocaleString();
}

function showFix(fix) {
  $('last-fix').textContent = `${describeTime(fix.time)}: ${fix.lat.toFixed(5)}, ${fix.lon.toFixed(5)} ±${Math.round(fix.accuracy)} m`;
}

async function onPosition(position) {
  const fix = { lat: position.coords.latitude, lon: position.coords.longitude, accuracy: position.coords.accuracy, time: position.timestamp };
  const background = document.visibilityState === 'hidden';
  $('tracker-error').textContent = '';
  if (app.monitor.consider(fix, background) !== 'accepted') return;
  const doc = Object.assign({ _id: newDocumentID() }, locationDocument(fix, app.account.username, background, app.sessionID));
  await app.store.enqueue([doc]);
  sync();
  refreshPlaces(fix);
  app.lastFix = fix;
  showFix(fix);
  saveStatus();
  await showPending();
}

// A timeout only means no new position yet (standing still): tracking goes on.
function onPositionError(error) {
  if (error.code === error.TIMEOUT) return;
  $('tracker-error').textContent = error.code === error.PERMISSION_DENIED
    ? 'Location access is off for this site: allow it in the browser to track.' : `No position (${error.message || 'unavailable'}); still trying.`;
}

// MARK: Sync

const SYNC_BATCH = 200;
const SYNC_BYTES = 8 * 1024 * 1024;
const SYNC_TIMEOUT = 60000;  // a server that takes the request and never answers counts as not answering

// Sends what waits in the outbox, oldest first, in batches; each document keeps the id it got
// on the phone, so a batch sent twice (its answer lost to a dropped connection) creates nothing
// twice: the server answers `conflict` for what it has, which counts as sent. Then records
// what this device sent in its `_local` document. One sync at a time; after a failure, again
// later (a few seconds, doubling to a minute), or at once when the network comes back.
function sync() {
  if (!app.account) return Promise.resolve();
  if (!app.syncing) app.syncing = syncNow().finally(() => { app.syncing = null; });
  return app.syncing;
}
app.sync = sync;  // for the browser tests

// The oldest waiting documents, at most SYNC_BATCH of them and about SYNC_BYTES of JSON (photos
// are large): always at least one.
async function nextBatch() {
  const docs = await app.store.pending(SYNC_BATCH);
  let bytes = 0;
  const batch = [];
  for (const doc of docs) {
    bytes += JSON.stringify(doc).length;
    if (batch.length > 0 && bytes > SYNC_BYTES) break;
    batch.push(doc);
  }
  return batch;
}

async function syncNow() {
  clearTimeout(app.retry);
  const account = app.account;
  const authorization = authorizationOf(account);
  try {
    let sentNow = 0;
    for (;;) {
      const docs = await nextBatch();
      if (docs.length === 0) break;
      const response = await fetch(`${account.databaseURL}/_bulk_docs`, {
        method: 'POST', headers: { Authorization: authorization, 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ docs }), signal: AbortSignal.timeout(SYNC_TIMEOUT),
      });
      const answer = await response.json().catch(() => null);
      if (!response.ok || !Array.isArray(answer)) {
        throw new Error(response.status === 401 ? 'the server no longer knows this device: sign out and in again'
          : `the server answered ${response.status}${answer && answer.reason ? `: ${answer.reason}` : ''}`);
      }
      const refused = answer.filter((row) => row.error && row.error !== 'conflict');
      const taken = new Set(answer.filter((row) => !row.error || row.error === 'conflict').map((row) => row.id));
      await app.store.sent(docs.filter((doc) => taken.has(doc._id)));
      sentNow += answer.filter((row) => !row.error).length;  // new on the server (a conflict: it had it)
      if (refused.length) throw new Error(`the server refused ${refused.length} location(s): ${refused[0].error} ${refused[0].reason || ''}`);
    }
    if (sentNow > 0) await recordSent(account, authorization, sentNow);
    app.failures = 0;
    app.reachable = true;
    app.lastSync = Date.now();
    $('last-sync').textContent = describeTime(app.lastSync);
    $('tracker-error').textContent = '';
    saveStatus();
  } catch (error) {
    app.failures += 1;
    // A fetch that gets no answer at all is a TypeError: no network, or no server on it.
    const unanswered = !navigator.onLine || error instanceof TypeError || error.name === 'TimeoutError';
    app.reachable = unanswered && !navigator.onLine ? app.reachable : !unanswered;
    $('tracker-error').textContent = unanswered ? '' : `Not sent: ${error.message}. Trying again.`;
    app.retry = setTimeout(sync, Math.min(60000, 2000 * 2 ** Math.min(app.failures, 5)));
  } finally {
    await showPending();
  }
  // Signed out after this sync has ended (signing out waits for a sync under way).
  if (app.signOutWhenSent && app.account === account && await app.store.pendingCount() === 0) setTimeout(() => signOut().catch(report));
}

// `_local/lt-app-<key>` in the user's database: how many locations this device has sent and
// when, as a replication checkpoint records its progress (not replicated, not in _changes;
// as in CouchDB 3, a `_local` document is replaced without its revision).
async function recordSent(account, authorization, count) {
  account.sent = (account.sent || 0) + count;
  await app.store.saveAccount(account);
  const record = { sent: account.sent, last_sent_at: new Date().toISOString(), user_agent: navigator.userAgent };
  await fetch(`${account.databaseURL}/_local/lt-app-${encodeURIComponent(account.apiKey)}`, {
    method: 'PUT', headers: { Authorization: authorization, 'Content-Type': 'application/json', Accept: 'application/json' },
    body: JSON.stringify(record),
  });
}

// MARK: Photos

// A picture taken or picked: made at most 1600 pixels on its longer side (a phone's camera
// gives several megabytes; the server and the sync need far less), stored as a JPEG
// attachment on a location document at the phone's position — GeoPix's photos, which the
// dashboard shows too — and sent with the locations.
async function addPhoto(file) {
  const position = app.lastFix || await onePosition();
  const image = await createImageBitmap(file);
  const scale = Math.min(1, 1600 / Math.max(image.width, image.height));
  const canvas = document.createElement('canvas');
  canvas.width = Math.max(1, Math.round(image.width * scale));
  canvas.height = Math.max(1, Math.round(image.height * scale));
  canvas.getContext('2d').drawImage(image, 0, 0, canvas.width, canvas.height);
  const blob = await new Promise((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.85));
  const data = await new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(',')[1]);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
  const fix = { lat: position.lat, lon: position.lon, accuracy: position.accuracy || 0, time: Date.now() };
  const doc = Object.assign({ _id: newDocumentID() }, locationDocument(fix, app.account.username, false, app.sessionID));
  const caption = $('photo-caption').value.trim();
  if (caption) doc.caption = caption;
  doc._attachments = { 'photo.jpg': { content_type: 'image/jpeg', data } };
  await app.store.enqueue([doc]);
  $('photo-caption').value = '';
  $('tracker-error').textContent = '';
  $('sync-note').textContent = `Photo${caption ? ` “${caption}”` : ''} kept at ${fix.lat.toFixed(5)}, ${fix.lon.toFixed(5)}: it is sent with your locations.`;
  await showPending();
  sync();
  return doc._id;
}

// The phone's position once (a photo taken before any fix).
function onePosition() {
  return new Promise((resolve, reject) => {
    if (!navigator.geolocation) { reject(new Error('this browser cannot tell its position')); return; }
    navigator.geolocation.getCurrentPosition(
      (p) => resolve({ lat: p.coords.latitude, lon: p.coords.longitude, accuracy: p.coords.accuracy }),
      () => reject(new Error('no position for the photo: allow location access')), { enableHighAccuracy: true, timeout: 30000 });
  });
}

// A document's picture: inline (taken on this phone) or a stub (restored from the server).
const photoOf = (doc) => doc._attachments && Object.entries(doc._attachments).find(([, a]) => (a.content_type || '').startsWith('image/') && (a.data || a.stub));

// Where a picture can be shown from: its own bytes, or the server's copy fetched with this
// device's key (an <img> cannot send it) and kept for the session.
async function photoURL(doc) {
  const [name, attachment] = photoOf(doc);
  if (attachment.data) return `data:${attachment.content_type};base64,${attachment.data}`;
  if (!app.photoURLs.has(doc._id)) {
    const response = await fetch(`/api/photos/${encodeURIComponent(doc._id)}/${encodeURIComponent(name)}`, { headers: { Authorization: authorizationOf(app.account) } });
    if (!response.ok) throw new Error(`photo: the server answered ${response.status}`);
    app.photoURLs.set(doc._id, URL.createObjectURL(await response.blob()));
  }
  return app.photoURLs.get(doc._id);
}

// MARK: Places near me

async function getJSON(path) {
  const response = await fetch(path, { headers: { Accept: 'application/json' } });
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
}

// Online, keeps the device's copy of the region's places current; offline it stays as it was.
async function refreshPlaces(position) {
  if (!navigator.onLine) return;
  try {
    if (await app.places.refresh(position, getJSON) && app.view === 'places') showPlaces();
  } catch (error) {
    console.warn('places not refreshed:', error);
  }
}

// The position places are near: the last fix, else the newest location kept.
async function currentPosition() {
  if (app.lastFix) return app.lastFix;
  const track = await myTrack();
  const last = track[track.length - 1];
  return last ? { lat: last.geometry.coordinates[1], lon: last.geometry.coordinates[0] } : null;
}

async function showPlaces() {
  const position = await currentPosition();
  const list = $('places-list');
  if (!position) {
    $('places-summary').textContent = 'Start tracking to see the places near you.';
    list.replaceChildren();
    return;
  }
  const { places, complete } = app.places.near(position);
  $('places-summary').textContent = `${places.length} place${places.length === 1 ? '' : 's'} within ${formatDistance(app.places.queryRadius)}`
    + (complete ? '.' : ' — the phone holds no places this far out yet; they come with the network.');
  list.replaceChildren(...places.map(({ place, distance }) => {
    const item = document.createElement('li');
    const open = element('button', `${place.name || place._id} — ${formatDistance(distance)}`, { type: 'button', class: 'place-item' });
    open.addEventListener('click', () => showPlaceOnMap(place._id).catch(report));
    item.append(open);
    return item;
  }));
}

// A place from the list, opened on the map.
async function showPlaceOnMap(id) {
  show('map');
  await app.mapShown;
  const marker = app.placeMarkers.get(id);
  if (!marker) return;
  app.map.setView(marker.getLatLng(), Math.max(app.map.getZoom(), 15), { animate: false });
  marker.openPopup();
}

// Metres as a person reads them: in the unit system of the browser's language (miles and feet
// for the United States, Liberia and Myanmar; kilometres and metres elsewhere).
function formatDistance(metres) {
  if (metres === null || metres === undefined) return 'near';
  const region = (navigator.language || 'en').split('-')[1] || '';
  if (['US', 'LR', 'MM'].includes(region.toUpperCase())) {
    const feet = metres / 0.3048;
    return feet < 1000 ? `${Math.round(feet)} ft` : `${(metres / 1609.344).toFixed(1)} mi`;
  }
  return metres < 1000 ? `${Math.round(metres)} m` : `${(metres / 1000).toFixed(1)} km`;
}

// MARK: Map

// Every location of mine on this phone, sent or not, oldest first.
async function myTrack() {
  const byID = new Map();
  for (const doc of (await app.store.kept()).concat(await app.store.pending(100000))) byID.set(doc._id, doc);
  return [...byID.values()].sort((a, b) => a.created_at - b.created_at);
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`cannot load ${src}`));
    document.head.appendChild(script);
  });
}

async function setUpMap() {
  const config = app.config || (app.config = await getJSON('config.json'));
  if (!config.leaflet) {
    $('map').textContent = 'The map needs Leaflet on the server (Debian\'s libjs-leaflet); the list below still works.';
    return false;
  }
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.href = config.leaflet_css;
  document.head.appendChild(style);
  await loadScript(config.leaflet);
  app.map = L.map('map', { zoomControl: true, zoomSnap: 0.25 }).setView([37.45, -122.2], 9);
  if (config.tiles && config.tiles !== 'none') {
    let loaded = 0;
    const tiles = L.tileLayer(config.tiles, { attribution: config.attribution, maxZoom: 19 }).addTo(app.map);
    tiles.on('tileload', () => { loaded += 1; $('map-note').textContent = ''; });
    tiles.on('tileerror', () => { if (loaded === 0) $('map-note').textContent = 'No map background (offline, or the tile server cannot be reached); the track still shows.'; });
  }
  app.trackLayer = L.layerGroup().addTo(app.map);
  return true;
}

// My track as a line, the latest position marked, fitted to the data; the list newest first.
async function showMap() {
  const everything = await myTrack();
  const track = everything.filter((doc) => !photoOf(doc));
  const photos = everything.filter(photoOf).reverse();
  const sources = new Map(await Promise.all(photos.map(async (doc) => [doc._id, await photoURL(doc).catch(() => '')])));
  // Each photo opens in the viewer (the photo, when, where, "show on the map").
  const opener = (doc, label) => {
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'photo-open';
    open.setAttribute('aria-label', `Open ${label}`);
    const image = document.createElement('img');
    image.src = sources.get(doc._id);
    image.alt = '';
    open.appendChild(image);
    open.addEventListener('click', () => openPhoto(doc, sources.get(doc._id)));
    return open;
  };
  const describe = (doc) => `${doc.caption ? `${doc.caption}, ` : ''}${new Date(doc.created_at).toLocaleString()}`;
  $('photo-list').replaceChildren(...photos.map((doc) => {
    const item = document.createElement('li');
    item.append(opener(doc, describe(doc)), document.createTextNode(describe(doc)));
    return item;
  }));
  $('photos-empty').hidden = photos.length > 0;
  $('track-empty').hidden = track.length > 0;
  $('track-list').replaceChildren(...trackDays(track).map(listDay));
  // Set up once, however many showings wait for it (the view opened while history arrives).
  if (!app.mapSetup) {
    app.mapSetup = setUpMap().catch((error) => { app.mapSetup = null; $('map-note').textContent = `No map: ${error.message}`; return false; });
  }
  if (!(await app.mapSetup)) return;
  app.map.closePopup();
  app.trackLayer.clearLayers();
  const points = track.map((doc) => [doc.geometry.coordinates[1], doc.geometry.coordinates[0]]);
  if (points.length > 1) L.polyline(points, { color: '#1f6feb', weight: 4, className: 'track-line' }).addTo(app.trackLayer);
  if (points.length) {
    L.marker(points[points.length - 1], { icon: L.divIcon({ className: 'latest-dot', iconSize: [18, 18] }), title: 'Latest location', alt: 'Latest location' })
      .addTo(app.trackLayer);
  }
  // Photos within 30 m of each other share one pin (with their number), whose popup holds
  // each of them: none hides under another.
  app.photoPins = new Map();
  for (const group of photoGroups(photos, 30)) {
    const at = [group[0].geometry.coordinates[1], group[0].geometry.coordinates[0]];
    const label = group.length === 1 ? (group[0].caption || 'Photo') : `${group.length} photos here`;
    const popup = document.createElement('div');
    popup.className = 'photo-popup';
    for (const doc of group) popup.append(opener(doc, describe(doc)), document.createTextNode(describe(doc)));
    const pin = L.marker(at, { icon: L.divIcon({ className: 'photo-pin', iconSize: [44, 44] }), title: label, alt: label }).bindPopup(popup);
    pin.on('add', () => {
      const badge = document.createElement('span');
      badge.textContent = group.length === 1 ? '▣' : String(group.length);
      pin.getElement().replaceChildren(badge);
    });
    pin.addTo(app.trackLayer);
    for (const doc of group) app.photoPins.set(doc._id, pin);
    points.push(at);
  }
  // The map's size first (it was hidden until now), then fitted to everything it shows.
  app.map.invalidateSize();
  if (points.length === 1) app.map.setView(points[0], 15, { animate: false });
  else if (points.length > 1) app.map.fitBounds(points, { padding: [24, 24], animate: false });
  await drawPlaces();
}

// Photos gathered greedily: each joins the first group whose first photo is within `metres`.
function photoGroups(photos, metres) {
  const groups = [];
  for (const doc of photos) {
    const [lon, lat] = doc.geometry.coordinates;
    const near = groups.find((group) => {
      const [lon0, lat0] = group[0].geometry.coordinates;
      return ltStore.sphereDistance({ lat, lon }, { lat: lat0, lon: lon0 }) <= metres;
    });
    if (near) near.push(doc); else groups.push([doc]);
  }
  return groups;
}

// The photo viewer: the photo large, when and where it was taken, and its pin on the map.
function openPhoto(doc, source) {
  const viewer = $('photo-viewer');
  const [lon, lat] = doc.geometry.coordinates;
  $('photo-title').textContent = doc.caption || 'Photo';
  $('photo-image').src = source;
  $('photo-image').alt = doc.caption || 'Photo';
  $('photo-details').textContent = `Taken ${new Date(doc.created_at).toLocaleString()} at ${lat.toFixed(5)}, ${lon.toFixed(5)}.`;
  $('photo-on-map').onclick = () => {
    viewer.close();
    app.map.closePopup();
    app.map.setView([lat, lon], Math.max(app.map.getZoom(), 17), { animate: false });
    const pin = app.photoPins && app.photoPins.get(doc._id);
    if (pin) pin.openPopup();
    $('map').scrollIntoView({ block: 'nearest' });
  };
  viewer.showModal();
  $('photo-close').focus();
}

// My track by day, newest first: each day with its distance and time from first to last fix,
// each fix with its time and how far it is from the one before.
function trackDays(track) {
  const days = [];
  let previous = null;
  for (const doc of track) {
    const [lon, lat] = doc.geometry.coordinates;
    const point = { lat, lon };
    const key = new Date(doc.created_at).toDateString();
    if (!days.length || days[days.length - 1].key !== key) {
      days.push({ key, first: doc.created_at, last: doc.created_at, distance: 0, fixes: [] });
      previous = null;
    }
    const day = days[days.length - 1];
    const step = previous ? ltStore.sphereDistance(previous, point) : null;
    if (step !== null) day.distance += step;
    day.last = doc.created_at;
    day.fixes.push({ time: doc.created_at, step });
    previous = point;
  }
  return days.reverse();
}

function listDay(day) {
  const item = element('li', null, { class: 'day' });
  const minutes = Math.round((day.last - day.first) / 60000);
  const span = minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
  const date = new Date(day.first).toLocaleDateString(undefined, { weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' });
  const fixes = element('ol', null, { class: 'fixes' });
  fixes.replaceChildren(...day.fixes.slice().reverse().map((fix) => element('li',
    `${new Date(fix.time).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}` + (fix.step === null ? ' — start' : ` — ${formatDistance(fix.step)} on`),
    { class: 'fix' })));
  item.append(element('p', `${date}: ${day.fixes.length} location${day.fixes.length === 1 ? '' : 's'}, ${formatDistance(day.distance)} in ${span}`, { class: 'day-title' }), fixes);
  return item;
}

// Places near me on the map, as pins big enough to tap (44 px). Tapping one opens it: its name,
// how far, and "Report wrong position", after which the pin can be dragged — or the map tapped —
// to where the place really is, and the report is sent (`POST /api/places/:id/adjustments`,
// with this device's key) for an admin to review in the dashboard. The pin goes back until then.
app.placeMarkers = new Map();
async function drawPlaces() {
  const position = await currentPosition();
  if (!position) return;
  app.placeMarkers.clear();
  for (const { place, distance } of app.places.near(position).places) {
    const [lon, lat] = place.geometry.coordinates;
    const name = place.name || place._id;
    const marker = L.marker([lat, lon], {
      draggable: false, title: name, alt: name, keyboard: true,
      icon: L.divIcon({ className: 'place-pin', iconSize: [44, 44], html: '<span></span>' }),
    }).addTo(app.trackLayer);
    marker.bindPopup(() => placeDetails(place, distance, marker, [lat, lon]));
    marker.on('dragend', () => confirmCorrection(place, marker, [lat, lon]));
    app.placeMarkers.set(place._id, marker);
  }
}

function placeDetails(place, distance, marker, original) {
  const box = element('div', null, { class: 'place-details' });
  const report = element('button', 'Report wrong position', { type: 'button', class: 'report-position secondary' });
  report.addEventListener('click', () => startCorrection(place, marker, original));
  box.append(element('strong', place.name || place._id), element('p', `${formatDistance(distance)} from you`), report);
  return box;
}

// After "Report wrong position": the pin follows a drag, or jumps to a tap on the map.
function startCorrection(place, marker, original) {
  marker.closePopup();
  marker.dragging.enable();
  const name = place.name || place._id;
  $('map-note').textContent = `Drag the pin of ${name} to where it really is, or tap the map there.`;
  app.map.once('click', (event) => {
    if (!marker.dragging.enabled()) return;
    marker.setLatLng(event.latlng);
    confirmCorrection(place, marker, original);
  });
}

function element(tag, text, attributes) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  return node;
}

function confirmCorrection(place, marker, original) {
  const to = marker.getLatLng();
  const name = place.name || place._id;
  const box = element('div', null, { class: 'correction' });
  const text = element('p', `Report that ${name} is here?`);
  const send = element('button', 'Send for review', { type: 'button', class: 'send-correction' });
  const cancel = element('button', 'Cancel', { type: 'button', class: 'secondary' });
  marker.dragging.disable();
  $('map-note').textContent = '';
  const putBack = () => marker.setLatLng(original);
  cancel.addEventListener('click', () => { putBack(); marker.closePopup(); });
  send.addEventListener('click', async () => {
    send.disabled = true;
    try {
      const response = await fetch(`/api/places/${encodeURIComponent(place._id)}/adjustments`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json',
          Authorization: 'Basic ' + btoa(`${app.account.apiKey}:${app.account.apiSecret}`) },
        body: JSON.stringify({ latitude: to.lat, longitude: to.lng, comment: 'reported from the tracker app' }),
      });
      if (!response.ok) throw new Error(`the server answered ${response.status}`);
      text.textContent = `Thank you: ${name}'s new position is sent for review.`;
      send.remove();
      cancel.textContent = 'Close';
    } catch (error) {
      text.textContent = navigator.onLine ? `Not sent: ${error.message}.` : 'No network: try again when there is one.';
      send.disabled = false;
    }
    putBack();
  });
  box.append(text, send, cancel);
  marker.unbindPopup();
  marker.bindPopup(box).openPopup();
  // Once this one is closed, tapping the pin opens the place again.
  marker.once('popupclose', () => setTimeout(() => {
    // After Leaflet has finished closing it.
    marker.unbindPopup();
    const distance = app.lastFix ? ltStore.sphereDistance(app.lastFix, { lat: original[0], lon: original[1] }) : null;
    marker.bindPopup(() => placeDetails(place, distance, marker, original));
  }));
}

function show(view) {
  app.view = view;
  for (const button of document.querySelectorAll('#views button')) {
    if (button.dataset.view === view) button.setAttribute('aria-current', 'page'); else button.removeAttribute('aria-current');
  }
  for (const panel of document.querySelectorAll('.view')) panel.hidden = panel.id !== `view-${view}`;
  if (view === 'map') app.mapShown = showMap().catch(report);
  if (view === 'places') showPlaces().catch(report);
}

// MARK: Screens

async function showPending() {
  const waiting = await app.store.pendingCount();
  $('pending').textContent = String(waiting);
  showConnection(waiting);
  showSyncNote(waiting);
}

// One status for the network, the server and the outbox, in the header: online and all sent;
// offline (normal: what is recorded waits on the phone); or the server not answering.
let lastWaiting = 0;
function showConnection(waiting = lastWaiting) {
  lastWaiting = waiting;
  const state = !navigator.onLine ? 'offline' : app.reachable === false ? 'unreachable' : 'online';
  const words = { online: 'Online', offline: 'Offline', unreachable: 'Server unreachable' }[state];
  const outbox = !app.account ? '' : waiting > 0 ? ` · ${waiting} waiting` : app.reachable ? ' · all sent' : '';
  $('connection').textContent = words + outbox;
  $('connection').dataset.state = state;
}

// What happens to what waits, said plainly (not as an error: working offline is normal).
function showSyncNote(waiting = lastWaiting) {
  const what = `${waiting} location${waiting === 1 ? '' : 's'}`;
  let note = '';
  if (app.signOutWhenSent) note = `You will be signed out once the ${what} waiting ${waiting === 1 ? 'is' : 'are'} sent.`;
  else if (waiting > 0 && !navigator.onLine) note = `Offline: ${what} kept on this phone, sent when the network is back.`;
  else if (waiting > 0 && app.reachable === false) note = `The server does not answer: ${what} kept on this phone, sent when it does.`;
  if (note || !$('sync-note').textContent.startsWith('Photo')) $('sync-note').textContent = note;
}

function showTracker() {
  $('welcome').hidden = true;
  $('tracker').hidden = false;
  $('who').textContent = app.account.username;
  $('tracking-note').textContent = 'Tracking runs while this app is open: a web app cannot track once it is closed.';
  showPending().catch(report);
  sync();
}

function report(error) {
  console.error(error);
  $('tracker-error').textContent = String((error && error.message) || error);
}

async function start() {
  showConnection();
  window.addEventListener('online', () => { showPending().catch(report); sync(); });
  window.addEventListener('offline', () => showPending().catch(report));
  app.store = await TrackerStore.open();
  app.places = await new PlacesCache(app.store).load();
  app.account = await app.store.account();
  setUpSettings();
  if (app.account) {
    await loadSettings().catch(report);
    app.signOutWhenSent = Boolean(await app.store.state('sign-out-when-sent').catch(() => false));
    showTracker();
    await restoreStatus().catch(report);
  } else {
    $('welcome').hidden = false;
  }
  const form = $('account-form');
  // While the server answers, both buttons wait (no second request), the pressed one says so.
  async function submit(action, button, busyText) {
    $('account-error').textContent = '';
    if (!form.reportValidity()) return;
    const buttons = [$('sign-in'), $('register')];
    const text = button.textContent;
    for (const b of buttons) b.disabled = true;
    form.setAttribute('aria-busy', 'true');
    button.textContent = busyText;
    try {
      await action($('username').value.trim(), $('password').value);
      $('password').value = '';
    } catch (error) {
      $('account-error').textContent = error.status === 401 ? 'Name or password is incorrect.'
        : error.status === 409 ? 'That name is taken.' : error instanceof TypeError ? 'The server cannot be reached: try again when there is a network.' : error.message;
    } finally {
      for (const b of buttons) b.disabled = false;
      form.removeAttribute('aria-busy');
      button.textContent = text;
    }
  }
  form.addEventListener('submit', (event) => { event.preventDefault(); submit(signIn, $('sign-in'), 'Signing in…'); });
  $('register').addEventListener('click', () => submit(register, $('register'), 'Creating…'));
  $('tracking').addEventListener('click', () => (app.watch === null ? startTracking() : stopTracking()));
  $('import-form').addEventListener('submit', (event) => { event.preventDefault(); importHistory(); });
  $('sign-out').addEventListener('click', () => requestSignOut().catch(report));
  $('sign-out-later').addEventListener('click', signOutOnceSent);
  $('sign-out-stay').addEventListener('click', () => { $('sign-out-dialog').close(); rememberSignOutWhenSent(false); showSyncNote(); });
  $('sign-out-discard').addEventListener('click', () => signOut().catch(report));
  $('photo-close').addEventListener('click', () => $('photo-viewer').close());
  $('photo-input').addEventListener('change', (event) => {
    const [file] = event.target.files;
    event.target.value = '';
    if (file) addPhoto(file).catch(report);
  });
  for (const button of document.querySelectorAll('#views button')) button.addEventListener('click', () => show(button.dataset.view));
  if ('serviceWorker' in navigator) {
    try { app.worker = await navigator.serviceWorker.register('sw.js', { scope: './' }); } catch (error) { console.warn('no offline start:', error); }
  }
  app.ready = true;
}

start().catch(report);
