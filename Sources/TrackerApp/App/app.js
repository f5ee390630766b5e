// The tracker app: sign in or register against the application API, track with the
// Geolocation API through TrackerKit's filter, keep every kept fix in IndexedDB's outbox and
// send the outbox to the user's own database with `_bulk_docs` whenever there is a network.
// Plain JavaScript, no build step; text from the server is put into the page as text only.
'use strict';

const { LocationMonitor, locationDocument, TrackerStore, newDocumentID } = self.ltStore;
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
  showTracker();
}

async function register(username, password) {
  await api('PUT', `/api/users/${encodeURIComponent(username)}`, { password });
  await signIn(username, password);
}

async function signOut() {
  stopTracking();
  clearTimeout(app.retry);
  if (app.syncing) await app.syncing.catch(() => {});
  await app.store.wipe();
  app.account = null;
  app.store = await TrackerStore.open();
  $('tracker').hidden = true;
  $('welcome').hidden = false;
}

// MARK: Tracking

function startTracking() {
  if (!navigator.geolocation) { $('tracker-error').textContent = 'This browser cannot tell its position.'; return; }
  app.sessionID = newDocumentID();
  app.monitor.resume();
  app.watch = navigator.geolocation.watchPosition(onPosition, onPositionError, { enableHighAccuracy: true, maximumAge: 0, timeout: 60000 });
  $('tracking').textContent = 'Stop tracking';
  $('tracking').setAttribute('aria-pressed', 'true');
}

function stopTracking() {
  if (app.watch !== null) navigator.geolocation.clearWatch(app.watch);
  app.watch = null;
  $('tracking').textContent = 'Start tracking';
  $('tracking').setAttribute('aria-pressed', 'false');
}

async function onPosition(position) {
  const fix = { lat: position.coords.latitude, lon: position.coords.longitude, accuracy: position.coords.accuracy, time: position.timestamp };
  const background = document.visibilityState === 'hidden';
  $('tracker-error').textContent = '';
  if (app.monitor.consider(fix, background) !== 'accepted') return;
  const doc = Object.assign({ _id: newDocumentID() }, locationDocument(fix, app.account.username, background, app.sessionID));
  await app.store.enqueue([doc]);
  sync();
  app.lastFix = fix;
  $('last-fix').textContent = `${new Date(fix.time).toLocaleTimeString()}: ${fix.lat.toFixed(5)}, ${fix.lon.toFixed(5)} ±${Math.round(fix.accuracy)} m`;
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

// Sends what waits in the outbox, oldest first, in batches; each document keeps the id it got
// on the phone, so a batch sent twice (its answer lost to a dropped connection) creates nothing
// twice: the server answers `conflict` for what it has, which counts as sent. Then records
// what this device sent in its `_local` document. One sync at a time; after a failure, again
// later (a few seconds, doubling to a minute), or at once when the network comes back.
function sync() {
  if (!app.account) return Promise.resolve();
  app.sync = sync;
  if (!app.syncing) app.syncing = syncNow().finally(() => { app.syncing = null; });
  return app.syncing;
}

async function syncNow() {
  clearTimeout(app.retry);
  const account = app.account;
  const authorization = 'Basic ' + btoa(`${account.apiKey}:${account.apiSecret}`);
  try {
    let sentNow = 0;
    for (;;) {
      const docs = await app.store.pending(SYNC_BATCH);
      if (docs.length === 0) break;
      const response = await fetch(`${account.databaseURL}/_bulk_docs`, {
        method: 'POST', headers: { Authorization: authorization, 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ docs }),
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
    app.lastSync = Date.now();
    $('last-sync').textContent = new Date(app.lastSync).toLocaleTimeString();
    $('tracker-error').textContent = '';
  } catch (error) {
    app.failures += 1;
    const offline = !navigator.onLine || error instanceof TypeError;
    $('tracker-error').textContent = offline ? 'No network: locations stay on this phone and are sent when it is back.'
      : `Not sent: ${error.message}. Trying again.`;
    app.retry = setTimeout(sync, Math.min(60000, 2000 * 2 ** Math.min(app.failures, 5)));
  } finally {
    await showPending();
  }
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

// MARK: Screens

async function showPending() { $('pending').textContent = String(await app.store.pendingCount()); }

function showTracker() {
  $('welcome').hidden = true;
  $('tracker').hidden = false;
  $('who').textContent = app.account.username;
  showPending().catch(report);
  sync();
}

function report(error) {
  console.error(error);
  $('tracker-error').textContent = String((error && error.message) || error);
}

function showConnection() { $('connection').textContent = navigator.onLine ? 'online' : 'offline'; }

async function start() {
  showConnection();
  window.addEventListener('online', () => { showConnection(); sync(); });
  window.addEventListener('offline', showConnection);
  app.store = await TrackerStore.open();
  app.account = await app.store.account();
  if (app.account) showTracker(); else $('welcome').hidden = false;
  const form = $('account-form');
  async function submit(action) {
    $('account-error').textContent = '';
    if (!form.reportValidity()) return;
    try {
      await action($('username').value.trim(), $('password').value);
      $('password').value = '';
    } catch (error) {
      $('account-error').textContent = error.status === 401 ? 'Name or password is incorrect.'
        : error.status === 409 ? 'That name is taken.' : error.message;
    }
  }
  form.addEventListener('submit', (event) => { event.preventDefault(); submit(signIn); });
  $('register').addEventListener('click', () => submit(register));
  $('tracking').addEventListener('click', () => (app.watch === null ? startTracking() : stopTracking()));
  $('sign-out').addEventListener('click', () => signOut().catch(report));
  if ('serviceWorker' in navigator) {
    try { app.worker = await navigator.serviceWorker.register('sw.js', { scope: './' }); } catch (error) { console.warn('no offline start:', error); }
  }
  app.ready = true;
}

start().catch(report);
