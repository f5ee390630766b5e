// The LocationTracker dashboard: plain JavaScript against the application API on this port.
// Everything shown comes from the API with the session cookie; names and other text from the
// database are put into the page as text, never as HTML.
'use strict';

const state = {
  config: null,      // /dashboard/config.json
  session: null,     // {name, roles, kind: user|admin|analyst}
  map: null,         // the Leaflet map, when Leaflet loaded
  layer: null,       // what the current view draws
  view: null,
  track: [],         // the signed-in user's locations, oldest first
  places: [],        // place documents (Places view)
  placeMarkers: new Map(),
  live: null,        // EventSource of the user's new locations
  fitted: false,
  dismissedNotes: new Set(),  // the causes of map notes the user dismissed
  people: [],        // the People view's rows (/api/analysis/users)
  personLayers: new Map(),  // name → that person's layer (last position, trip)
  hiddenPeople: new Set(),  // names unticked in the People view
  timer: null,       // the People view's refresh
};
window.lt = state;  // for the browser tests and curious operators

const $ = (id) => document.getElementById(id);

async function api(method, path, body) {
  const headers = { 'X-Requested-With': 'lt-dashboard', 'Accept': 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (!response.ok) {
    const error = new Error((json && (json.reason || json.error)) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return json;
}

function element(tag, text, attributes) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  return node;
}

function button(label, onClick, attributes) {
  const node = element('button', label, Object.assign({ type: 'button' }, attributes || {}));
  node.addEventListener('click', onClick);
  return node;
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = element('script', null, { src });
    script.onload = resolve;
    script.onerror = () => reject(new Error(`cannot load ${src}`));
    document.head.appendChild(script);
  });
}

function loadStyle(href) {
  document.head.appendChild(element('link', null, { rel: 'stylesheet', href }));
}

// Great-circle distance in metres (haversine, mean Earth radius), as the server measures it.
function distance(a, b) {
  const rad = Math.PI / 180, R = 6371008.8;
  const dLat = (b[0] - a[0]) * rad, dLon = (b[1] - a[1]) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a[0] * rad) * Math.cos(b[0] * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * R * Math.asin(Math.min(1, Math.sqrt(h)));
}

const latLon = (doc) => [doc.geometry.coordinates[1], doc.geometry.coordinates[0]];
const when = (ms) => new Date(ms).toLocaleString();
const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
const msFrom = (input) => (input.value ? String(new Date(input.value).getTime()) : null);

// One unit system everywhere: the browser's locale (miles and feet in the US, Liberia and
// Myanmar), or the one chosen in the header (kept in this browser).
function unitSystem() {
  const chosen = localStorage.getItem('lt-units');
  if (chosen === 'metric' || chosen === 'imperial') return chosen;
  return /^en-(US|LR|MM)\b/i.test(navigator.language || '') ? 'imperial' : 'metric';
}

function formatDistance(m) {
  if (unitSystem() === 'imperial') {
    const feet = m * 3.28084;
    if (feet < 1000) return `${Math.round(feet)} ft`;
    const miles = m / 1609.344;
    return `${miles < 10 ? miles.toFixed(2) : miles.toFixed(1)} mi`;
  }
  return m < 1000 ? `${Math.round(m)} m` : `${(m / 1000).toFixed(m < 10000 ? 2 : 1)} km`;
}

function formatDuration(ms) {
  const minutes = Math.round(ms / 60000);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

// "5 min ago", "3 h ago", "2 days ago" (with the date and time in the title for exactness).
function ago(ms) {
  const seconds = Math.max(0, (Date.now() - ms) / 1000);
  if (seconds < 90) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400 * 2) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} days ago`;
}

// A day as the date input holds it (local time), and the first and last millisecond of one.
const pad = (n) => String(n).padStart(2, '0');
const dayOf = (ms) => { const d = new Date(ms); return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`; };
function dayRange(day) {
  const [y, m, d] = day.split('-').map(Number);
  return [new Date(y, m - 1, d).getTime(), new Date(y, m - 1, d + 1).getTime() - 1];
}
const dayLabel = (day) => new Date(dayRange(day)[0]).toLocaleDateString([], { weekday: 'long', year: 'numeric', month: 'long', day: 'numeric' });

// Distance along a path of [lat, lon] points, in metres.
function pathLength(points) {
  let total = 0;
  for (let i = 1; i < points.length; i++) total += distance(points[i - 1], points[i]);
  return total;
}

// A colour per person, the same on every visit (a hash of the name into a palette that reads
// on the map and to people with the common colour-vision differences, ColorBrewer's Dark2 + Set1).
const palette = ['#1b9e77', '#d95f02', '#7570b3', '#e7298a', '#66a61e', '#e6ab02', '#a6761d', '#377eb8', '#e41a1c', '#984ea3'];
function colourOf(name) {
  let hash = 0;
  for (const c of name) hash = (hash * 31 + c.codePointAt(0)) >>> 0;
  return palette[hash % palette.length];
}

function pin(kind) {
  return L.divIcon({ className: `pin ${kind || ''}`, html: '', iconSize: [22, 22] });
}

// A pin whose label is set as text once it is on the map (never as HTML).
function marker(position, label, kind, title) {
  const m = L.marker(position, { icon: pin(kind), title: title || String(label), alt: title || String(label), keyboard: true });
  m.on('add', () => { const icon = m.getElement(); if (icon) icon.textContent = label; });
  return m;
}

// MARK: Start, sign-in, sign-out

async function start() {
  // The sign-in form is hidden until this script takes its submissions: a form sent before that
  // would reach no script (and, sent natively, would put the password in the page's address).
  $('sign-in-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    $('sign-in-error').textContent = '';
    try {
      enter(await api('POST', '/api/session', { username: $('username').value, password: $('password').value }));
    } catch (error) {
      $('sign-in-error').textContent = error.status === 401 ? 'Name or password is incorrect.' : error.message;
    }
  });
  state.config = await api('GET', 'config.json');
  const who = await api('GET', '/api/session');
  if (who && who.name) enter(who); else $('sign-in').hidden = false;
  // Said once after leaving on purpose (a new password, a deleted account).
  const farewell = sessionStorage.getItem('lt-farewell');
  if (farewell) { sessionStorage.removeItem('lt-farewell'); $('sign-in-note').textContent = farewell; $('sign-in-note').hidden = false; }
  $('units').value = unitSystem();
  $('units').addEventListener('change', () => {
    localStorage.setItem('lt-units', $('units').value);
    if (state.view) show(state.view);  // every distance said again in the chosen units
  });
  $('sign-out').addEventListener('click', async () => {
    if (state.live) state.live.close();
    await api('DELETE', '/api/session');
    window.location.reload();
  });
}

async function enter(session) {
  state.session = session;
  $('sign-in').hidden = true;
  $('workspace').hidden = false;
  $('views').hidden = false;
  $('who').hidden = false;
  $('who-name').textContent = `${session.name} (${session.kind})`;
  for (const item of document.querySelectorAll('#views button')) {
    const allowed = item.dataset.for ? item.dataset.for.split(' ').includes(session.kind) : true;
    item.hidden = !allowed;
    item.addEventListener('click', () => show(item.dataset.view));
  }
  await setUpMap();
  // A view named in the address (#people, #tracks, #places, #review, #analysis, #photos), if
  // allowed; else the user's own tracks, or for admins and analysts the people tracked.
  const named = document.querySelector(`#views button[data-view="${window.location.hash.slice(1)}"]`);
  show(named && !named.hidden ? named.dataset.view : session.kind === 'user' ? 'tracks' : 'people');
}

async function setUpMap() {
  const config = state.config;
  if (!config.leaflet) {
    $('map').textContent = 'The map needs Leaflet, which this server does not have: install Debian\'s libjs-leaflet and '
      + 'libjs-leaflet.markercluster (scripts/install-deps.sh does) and restart lt serve. The lists still work.';
    return;
  }
  loadStyle(config.leaflet_css);
  for (const href of config.markercluster_css) loadStyle(href);
  try {
    await loadScript(config.leaflet);
  } catch (error) {
    $('map').textContent = 'The map library could not be loaded; the lists still work.';
    return;
  }
  try { await loadScript(config.markercluster); } catch (error) { /* plain markers then */ }
  state.map = L.map('map', { maxZoom: 19 }).setView([37.45, -122.2], 9);
  state.note = mapNote();
  if (config.tiles && config.tiles !== 'none') addTiles(config.tiles);
  state.layer = L.layerGroup().addTo(state.map);
  state.map.on('click', (event) => {
    if (state.view === 'places' && state.session.kind === 'admin') {
      $('place-lat').value = event.latlng.lat.toFixed(7);
      $('place-lon').value = event.latlng.lng.toFixed(7);
    }
  });
}

// A line of text over the map's corner (role=status), hidden while empty; its × dismisses it
// (on a phone it covers much of the map), and the same cause does not bring it back.
function mapNote() {
  const Note = L.Control.extend({
    onAdd() {
      const box = element('div', null, { id: 'map-note', role: 'status', class: 'map-note' });
      const text = element('span', null, { class: 'map-note-text' });
      const dismiss = element('button', '×', { type: 'button', class: 'map-note-dismiss', 'aria-label': 'Dismiss this note' });
      dismiss.addEventListener('click', () => {
        if (box.dataset.cause) state.dismissedNotes.add(box.dataset.cause);
        box.hidden = true;
      });
      box.append(text, dismiss);
      box.hidden = true;
      L.DomEvent.disableClickPropagation(box);
      return box;
    },
  });
  const note = new Note({ position: 'bottomleft' });
  note.addTo(state.map);
  return note.getContainer();
}

// The tile layer; when its tiles do not load (offline, blocked, a wrong --tiles), says so
// instead of leaving a grey map, and takes the note back once tiles arrive.
function addTiles(template) {
  const tiles = L.tileLayer(template, { attribution: state.config.attribution, maxZoom: 19 });
  let loaded = 0, failed = 0;
  let host = template;
  try { host = new URL(template.replace(/\{[a-z]\}/g, '0')).host || template; } catch (e) { /* keep the template */ }
  tiles.on('tileload', () => {
    loaded += 1;
    if (state.note.dataset.cause === 'tiles') { state.note.hidden = true; delete state.note.dataset.cause; }
  });
  tiles.on('tileerror', () => {
    failed += 1;
    if (loaded === 0 && failed >= 2 && state.note.hidden && !state.dismissedNotes.has('tiles')) {
      state.note.querySelector('.map-note-text').textContent = `Map tiles from ${host} cannot be loaded (offline, or blocked), so the map has no background; `
        + 'tracks and places still show. An operator can choose another tile server with lt serve --tiles.';
      state.note.dataset.cause = 'tiles';
      state.note.hidden = false;
    }
  });
  tiles.addTo(state.map);
  return tiles;
}
state.addTiles = addTiles;  // for the browser tests

function show(view) {
  state.view = view;
  if (window.location.hash !== `#${view}`) history.replaceState(null, '', `#${view}`);
  state.fitted = false;
  for (const item of document.querySelectorAll('#views button')) {
    if (item.dataset.view === view) item.setAttribute('aria-current', 'page'); else item.removeAttribute('aria-current');
  }
  for (const panel of document.querySelectorAll('.panel')) panel.hidden = panel.id !== `panel-${view}`;
  // The account page has nothing to map: the page is the panel alone.
  const mapless = view === 'account';
  if ($('workspace').classList.contains('no-map') !== mapless) {
    $('workspace').classList.toggle('no-map', mapless);
    if (state.map && !mapless) state.map.invalidateSize();
  }
  if (state.layer) state.map.removeLayer(state.layer);
  if (state.map) state.layer = L.layerGroup().addTo(state.map);
  if (view !== 'tracks' && state.live) { state.live.close(); state.live = null; }
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
  ({ people: showPeople, tracks: showTracks, places: showPlaces, review: showReview, analysis: showAnalysis, photos: showPhotos, account: showAccount })[view]().catch(report);
}

// Shown in the panel, and logged: an unexpected failure is a console error the tests catch.
function report(error) {
  console.error(error);
  const panel = document.querySelector('.panel:not([hidden])');
  if (panel) panel.appendChild(element('p', String((error && error.message) || error), { role: 'alert', class: 'error' }));
}

function fit(points) {
  if (!state.map || state.fitted || points.length === 0) return;
  state.fitted = true;
  // At once, not animated: what is drawn and the view never disagree half-way through a zoom.
  if (points.length === 1) state.map.setView(points[0], 15, { animate: false });
  else state.map.fitBounds(points, { padding: [30, 30], maxZoom: 17, animate: false });
}

// MARK: My tracks: a day at a time (the day of the newest location first)

async function showTracks() {
  const form = $('track-filter');
  if (!form.dataset.ready) {
    form.dataset.ready = '1';
    form.addEventListener('submit', (event) => { event.preventDefault(); loadTrack().catch(report); });
    $('track-day').addEventListener('change', () => { if ($('track-day').value) loadTrack().catch(report); });
    const shift = (days) => {
      const [start] = dayRange($('track-day').value || dayOf(Date.now()));
      $('track-day').value = dayOf(start + days * 86400000 + 3600000 * 2);  // +2 h: days of 23 h
      loadTrack().catch(report);
    };
    $('track-prev').addEventListener('click', () => shift(-1));
    $('track-next').addEventListener('click', () => shift(1));
    $('track-latest').addEventListener('click', () => { latestDay().then(loadTrack).catch(report); });
  }
  if (!$('track-day').value) await latestDay();
  await loadTrack();
  if (!state.live) {
    state.live = new EventSource('/api/me/live');
    state.live.addEventListener('location', (event) => {
      const doc = JSON.parse(event.data);
      if (state.track.some((known) => known._id === doc._id) || dayOf(doc.created_at) !== $('track-day').value) return;
      state.track.push(doc);
      state.track.sort((a, b) => a.created_at - b.created_at);
      drawTrack();
    });
  }
}

// Sets the day shown to the day of the newest location (today when there is none).
async function latestDay() {
  const newest = (await api('GET', '/api/me/locations?limit=1')).locations;
  $('track-day').value = dayOf(newest.length ? newest[newest.length - 1].created_at : Date.now());
}

async function loadTrack() {
  const [from, to] = dayRange($('track-day').value);
  const query = new URLSearchParams({ limit: '10000', from: String(from), to: String(to) });
  state.track = (await api('GET', `/api/me/locations?${query}`)).locations;
  state.fitted = false;
  drawTrack();
}

function drawTrack() {
  const points = state.track.map(latLon);
  const day = $('track-day').value;
  // Each location of the day at its time, with how far it was from the one before.
  $('track-list').replaceChildren(...state.track.map((doc, i) => {
    const step = i > 0 ? ` · ${formatDistance(distance(points[i - 1], points[i]))} on` : ' · start';
    const item = element('li', `${clock(doc.created_at)}${step}${doc.properties && doc.properties.background ? ' (background)' : ''}`, { 'data-id': doc._id });
    item.title = `${when(doc.created_at)}: ${points[i][0].toFixed(5)}, ${points[i][1].toFixed(5)}`;
    return item;
  }));
  if (points.length) {
    const first = state.track[0].created_at, last = state.track[state.track.length - 1].created_at;
    $('track-summary').textContent = `${dayLabel(day)}: ${points.length} location${points.length === 1 ? '' : 's'}, ${clock(first)} to ${clock(last)} `
      + `(${formatDuration(last - first)}), ${formatDistance(pathLength(points))} travelled${points.length >= 10000 ? ' (the newest 10,000 of the day)' : ''}.`;
  } else {
    $('track-summary').textContent = `${dayLabel(day)}: no locations. Choose another day, or "Latest day"; a phone signed in as you (the tracker app at /app/) records them.`;
  }
  if (state.layer) {
    state.layer.clearLayers();
    drawPath(points, state.track.map((doc) => doc.created_at));
    fit(points);
  }
  if (points.length) loadNearbyPlaces(points[points.length - 1]).catch(report);
  else $('track-places').replaceChildren(element('li', 'No location that day, so no places near it.', { class: 'empty' }));
}

// A track as a line read at a glance: the path with arrows along it (direction), each fix a
// small dot (clustered where they crowd), the start and the last position marked. Into
// `options.layer` (the view's layer), in `options.colour`, for `options.name` (someone else's trip).
function drawPath(points, times, options = {}) {
  const layer = options.layer || state.layer;
  const whose = options.name ? `${options.name}: ` : '';
  if (points.length > 1) {
    L.polyline(points, { color: options.colour || '#1f6feb', weight: 4, opacity: 0.85, className: 'track-line' }).addTo(layer);
    for (const arrow of directionArrows(points)) arrow.addTo(layer);
  }
  const fixes = typeof L.markerClusterGroup === 'function'
    ? L.markerClusterGroup({ showCoverageOnHover: false, maxClusterRadius: 30, disableClusteringAtZoom: 18 })
    : L.layerGroup();
  const dot = L.divIcon({ className: 'fix', iconSize: [10, 10] });
  points.slice(0, -1).forEach((point, i) => {
    const label = `${whose}location ${i + 1}, ${when(times[i])}`;
    fixes.addLayer(L.marker(point, { icon: dot, title: label, alt: label, keyboard: false }));
  });
  fixes.addTo(layer);
  if (!options.name) state.fixes = fixes;
  if (points.length > 1) marker(points[0], 'S', 'start', `${whose}start, ${when(times[0])}`).setZIndexOffset(1000).addTo(layer);
  if (points.length) {
    const last = points.length - 1;
    marker(points[last], '●', 'latest', `${whose}last location, ${when(times[last])}`).setZIndexOffset(2000).addTo(layer);
    if (!options.name) L.circle(points[last], { radius: state.config.place_radius, color: '#2f9e44', fill: false, weight: 1 }).addTo(layer);
  }
}

// Arrows at the middle of segments, pointing the way the track went: at most about 25, on
// segments long enough to hold one. Mercator keeps angles, so the compass bearing is the angle
// on the screen.
function directionArrows(points) {
  const segments = [];
  for (let i = 1; i < points.length; i++) {
    if (distance(points[i - 1], points[i]) > 1) segments.push([points[i - 1], points[i]]);
  }
  const every = Math.max(1, Math.ceil(segments.length / 25));
  return segments.filter((_, i) => i % every === Math.floor(every / 2)).map(([a, b]) => {
    const rad = Math.PI / 180;
    const y = Math.sin((b[1] - a[1]) * rad) * Math.cos(b[0] * rad);
    const x = Math.cos(a[0] * rad) * Math.sin(b[0] * rad) - Math.sin(a[0] * rad) * Math.cos(b[0] * rad) * Math.cos((b[1] - a[1]) * rad);
    const bearing = (Math.atan2(y, x) / rad + 360) % 360;
    const arrow = L.marker([(a[0] + b[0]) / 2, (a[1] + b[1]) / 2], {
      icon: L.divIcon({ className: 'arrow', iconSize: [14, 14] }), interactive: false, keyboard: false,
    });
    arrow.on('add', () => {
      const head = element('span');
      head.style.transform = `rotate(${bearing.toFixed(1)}deg)`;
      arrow.getElement().replaceChildren(head);
    });
    arrow.bearing = bearing;
    return arrow;
  });
}

async function loadNearbyPlaces(position) {
  const query = new URLSearchParams({ lat: position[0], lon: position[1], radius: state.config.place_radius, relation: 'contains', nearest: 'true', include_docs: 'true', limit: '200' });
  const rows = (await api('GET', `/api/places?${query}`)).rows || [];
  $('track-places').replaceChildren(...rows.map((row) => element('li', `${row.doc.name} — ${formatDistance(distance(position, latLon(row.doc)))}`)));
  if (!rows.length) {
    $('track-places').replaceChildren(element('li', `No place within ${formatDistance(state.config.place_radius)} of the last location of the day.`, { class: 'empty' }));
  }
  if (state.layer && state.view === 'tracks') {
    for (const row of rows) marker(latLon(row.doc), '★', 'place', row.doc.name).addTo(state.layer);
  }
}

// MARK: People (admins and analysts): who is tracked, where each was last, their trips

async function showPeople() {
  const more = $('people-more');
  if (!more.dataset.ready) {
    more.dataset.ready = '1';
    more.addEventListener('click', () => { loadPeople(state.peopleNext).catch(report); });
  }
  state.personLayers = new Map();
  $('people-trip').textContent = '';
  await loadPeople(null);
  // Live: the positions again every 30 s while the view is open (the map stays where it is).
  state.timer = setInterval(() => { if (state.view === 'people') refreshPeople().catch(report); }, 30000);
}

async function loadPeople(after) {
  const query = new URLSearchParams({ limit: '50' });
  if (after) query.set('after', after);
  const answer = await api('GET', `/api/analysis/users?${query}`);
  state.people = after ? state.people.concat(answer.users) : answer.users;
  state.peopleNext = answer.next;
  drawPeople();
}

async function refreshPeople() {
  const answer = await api('GET', `/api/analysis/users?limit=${Math.min(200, Math.max(50, state.people.length))}`);
  state.people = answer.users;
  state.peopleNext = answer.next;
  drawPeople();
}

function drawPeople() {
  const people = state.people;
  const seen = people.filter((p) => p.last && Date.now() - p.last.time < 86400000).length;
  $('people-summary').textContent = people.length === 0
    ? 'Nobody is registered yet. People register in the tracker app (/app/) or through the API; their phones then send locations.'
    : `${people.length}${state.peopleNext ? '+' : ''} ${people.length === 1 ? 'person' : 'people'}; ${seen} seen in the last 24 hours.`;
  $('people-more').hidden = !state.peopleNext;
  $('people-list').replaceChildren(...people.map((person) => {
    const item = element('li', null, { 'data-name': person.name });
    const toggle = element('input', null, { type: 'checkbox', id: `person-${person.name}` });
    toggle.checked = !state.hiddenPeople.has(person.name);
    toggle.addEventListener('change', () => {
      if (toggle.checked) state.hiddenPeople.delete(person.name); else state.hiddenPeople.add(person.name);
      showPersonLayer(person.name);
    });
    const label = element('label', null, { for: `person-${person.name}` });
    const swatch = element('span', null, { class: 'swatch', 'aria-hidden': 'true' });
    swatch.style.background = colourOf(person.name);
    label.append(swatch, element('strong', person.name));
    const devices = person.devices.map((d) => d.device || 'unnamed device');
    const said = person.last
      ? `last seen ${ago(person.last.time)} (${when(person.last.time)})`
      : 'no locations yet';
    const details = element('span', ` — ${said}; ${devices.length ? `${devices.length === 1 ? 'device' : 'devices'}: ${devices.join(', ')}` : 'no device signed in'}`);
    item.append(toggle, label, details);
    if (person.last) {
      item.appendChild(button('Trip', () => showTrip(person).catch(report), { 'aria-label': `Show ${person.name}'s last day as a route` }));
      item.appendChild(button('Locate', () => { if (state.map) state.map.setView([person.last.lat, person.last.lon], 16); },
        { 'aria-label': `Show where ${person.name} was last` }));
    }
    return item;
  }));
  if (!state.layer) return;
  const positions = [];
  for (const person of people) {
    let layer = state.personLayers.get(person.name);
    if (!layer) { layer = { group: L.layerGroup(), last: null, trip: null }; state.personLayers.set(person.name, layer); }
    if (layer.last) layer.group.removeLayer(layer.last);
    layer.last = null;
    if (person.last) {
      const position = [person.last.lat, person.last.lon];
      positions.push(position);
      layer.last = L.circleMarker(position, { radius: 10, color: '#fff', weight: 3, fillColor: colourOf(person.name), fillOpacity: 1, className: 'person' })
        .bindTooltip(person.name, { permanent: true, direction: 'right', offset: [10, 0], className: 'person-label' })
        .bindPopup(() => element('div', `${person.name}: ${when(person.last.time)}${person.last.accuracy ? `, within ${formatDistance(person.last.accuracy)}` : ''}`));
      layer.group.addLayer(layer.last);
    }
    showPersonLayer(person.name);
  }
  if (!state.fitted && positions.length) {
    state.fitted = true;
    if (positions.length === 1) state.map.setView(positions[0], 14, { animate: false });
    else state.map.fitBounds(positions, { padding: [40, 40], maxZoom: 16, animate: false });
  }
}

// A person's layer on the map when their box is ticked, off it when not.
function showPersonLayer(name) {
  const layer = state.personLayers.get(name);
  if (!layer || !state.layer) return;
  if (state.hiddenPeople.has(name)) state.layer.removeLayer(layer.group); else state.layer.addLayer(layer.group);
}

// The whole day of a person's last location, as a route in their colour, fitted on the map.
async function showTrip(person) {
  const day = dayOf(person.last.time);
  const [from, to] = dayRange(day);
  const query = new URLSearchParams({ user: person.name, from: String(from), to: String(to), format: 'geojson' });
  const features = (await api('GET', `/api/analysis/locations?${query}`)).features || [];
  const points = features.map((f) => [f.geometry.coordinates[1], f.geometry.coordinates[0]]);
  const times = features.map((f) => f.properties.created_at || f.properties.timestamp);
  const layer = state.personLayers.get(person.name);
  if (!layer || !state.layer) return;
  if (layer.trip) layer.group.removeLayer(layer.trip);
  layer.trip = L.layerGroup();
  drawPath(points, times, { layer: layer.trip, colour: colourOf(person.name), name: person.name });
  layer.group.addLayer(layer.trip);
  state.hiddenPeople.delete(person.name);
  const toggle = $(`person-${person.name}`);
  if (toggle) toggle.checked = true;
  showPersonLayer(person.name);
  state.trip = { name: person.name, points };
  if (points.length > 1) state.map.fitBounds(points, { padding: [40, 40], maxZoom: 17, animate: false });
  else if (points.length) state.map.setView(points[0], 15, { animate: false });
  $('people-trip').textContent = points.length
    ? `${person.name}, ${dayLabel(day)}: ${points.length} locations, ${clock(times[0])} to ${clock(times[times.length - 1])} `
      + `(${formatDuration(times[times.length - 1] - times[0])}), ${formatDistance(pathLength(points))} travelled.`
    : `${person.name} has no locations on ${dayLabel(day)}.`;
}

// MARK: Places

async function showPlaces() {
  const admin = state.session.kind === 'admin';
  $('place-form').hidden = !admin;
  if (admin && !$('place-form').dataset.ready) setUpPlaceForm();
  const search = $('places-search');
  if (!search.dataset.ready) {
    search.dataset.ready = '1';
    search.addEventListener('input', filterPlaces);
    // Enter on a search that leaves one place shows it on the map.
    search.addEventListener('keydown', (event) => {
      if (event.key !== 'Enter') return;
      event.preventDefault();
      const shown = state.places.filter((place) => matchesSearch(place.name, search.value));
      if (shown.length === 1) focusPlace(shown[0]);
    });
  }
  await loadPlaces();
}

// Case- and accent-blind: "cafe" finds "Café".
const folded = (text) => String(text).normalize('NFD').replace(/[\u0300-\u036f]/g, '').toLowerCase();
const matchesSearch = (name, query) => folded(name).includes(folded(query.trim()));

// The list as the search box leaves it, as you type (the map keeps every place).
function filterPlaces() {
  const query = $('places-search').value;
  let shown = 0;
  for (const item of $('places-list').children) {
    const place = state.places.find((p) => p._id === item.dataset.id);
    const match = !query.trim() || (place && matchesSearch(place.name, query));
    item.hidden = !match;
    if (match) shown += 1;
  }
  $('places-summary').textContent = !query.trim() ? `${state.places.length} places.`
    : shown === 0 ? `No place matches “${query.trim()}”.` : `${shown} of ${state.places.length} places match “${query.trim()}”.`;
}

async function loadPlaces() {
  state.places = await fetchPlaces();
  drawPlaces();
}

// Every place, page by page (the geo query's limit is 200), by name.
async function fetchPlaces() {
  const places = [];
  let bookmark = '';
  for (;;) {
    const query = new URLSearchParams({ bbox: '-180,-90,180,90', include_docs: 'true', limit: '200' });
    if (bookmark) query.set('bookmark', bookmark);
    const page = await api('GET', `/api/places?${query}`);
    for (const row of page.rows || []) if (row.doc) places.push(row.doc);
    if (!page.rows || page.rows.length < 200 || !page.bookmark) break;
    bookmark = page.bookmark;
  }
  places.sort((a, b) => String(a.name).localeCompare(String(b.name)));
  return places;
}

function drawPlaces() {
  const admin = state.session.kind === 'admin';
  $('places-summary').textContent = `${state.places.length} places.`;
  $('places-list').replaceChildren(...state.places.map((place) => {
    const earlier = (place.previousPositions || []).length;
    const item = element('li', `${place.name}${place.verified ? ' ✓' : ''}${earlier ? ` (moved ${earlier}×)` : ''} `, { 'data-id': place._id });
    item.appendChild(button('Show', () => focusPlace(place), { 'aria-label': `Show ${place.name} on the map` }));
    if (admin) {
      item.appendChild(button('Edit', () => editPlace(place), { 'aria-label': `Edit ${place.name}` }));
      item.appendChild(button('Delete', () => deletePlace(place), { 'aria-label': `Delete ${place.name}` }));
    }
    return item;
  }));
  filterPlaces();
  state.placeMarkers = new Map();
  if (!state.layer) return;
  state.layer.clearLayers();
  const group = typeof L.markerClusterGroup === 'function' ? L.markerClusterGroup() : L.layerGroup();
  for (const place of state.places) {
    const m = marker(latLon(place), '★', 'place', place.name);
    m.bindPopup(() => placePopup(place));
    state.placeMarkers.set(place._id, m);
    group.addLayer(m);
  }
  group.addTo(state.layer);
  fit(state.places.map(latLon));
}

function placePopup(place) {
  const node = element('div');
  node.appendChild(element('strong', place.name));
  node.appendChild(element('div', `${latLon(place)[0].toFixed(6)}, ${latLon(place)[1].toFixed(6)}`));
  for (const earlier of place.previousPositions || []) {
    const [lon, lat] = earlier.geometry.coordinates;
    node.appendChild(element('div', `before ${earlier.replacedAt}: ${lat.toFixed(6)}, ${lon.toFixed(6)}`));
  }
  return node;
}

function focusPlace(place) {
  if (!state.map) return;
  state.map.setView(latLon(place), 16);
  const m = state.placeMarkers.get(place._id);
  if (m) setTimeout(() => m.openPopup(), 300);
}

function setUpPlaceForm() {
  const form = $('place-form');
  form.dataset.ready = '1';
  const reset = () => {
    form.reset();
    $('place-id').value = '';
    $('place-save').textContent = 'Add place';
    $('place-cancel').hidden = true;
  };
  $('place-cancel').addEventListener('click', reset);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    $('place-error').textContent = '';
    const body = { name: $('place-name').value, latitude: Number($('place-lat').value), longitude: Number($('place-lon').value) };
    try {
      const id = $('place-id').value;
      await api(id ? 'PUT' : 'POST', id ? `/api/places/${encodeURIComponent(id)}` : '/api/places', body);
      reset();
      await loadPlaces();
    } catch (error) { $('place-error').textContent = error.message; }
  });
  $('place-import').addEventListener('change', async (event) => {
    const file = event.target.files[0];
    if (!file) return;
    $('place-error').textContent = '';
    try {
      const json = JSON.parse(await file.text());
      const features = json.features || json.places || [];
      let added = 0;
      for (const feature of features) {
        if (!feature.geometry || feature.geometry.type !== 'Point') continue;
        const name = feature.name || (feature.properties && (feature.properties.name || feature.properties.title)) || 'Unnamed place';
        await api('POST', '/api/places', { name, latitude: feature.geometry.coordinates[1], longitude: feature.geometry.coordinates[0] });
        added += 1;
      }
      $('place-error').textContent = `${added} places imported.`;
      await loadPlaces();
    } catch (error) { $('place-error').textContent = `Import failed: ${error.message}`; }
    event.target.value = '';
  });
}

function editPlace(place) {
  $('place-id').value = place._id;
  $('place-name').value = place.name;
  $('place-lat').value = latLon(place)[0];
  $('place-lon').value = latLon(place)[1];
  $('place-save').textContent = 'Save place';
  $('place-cancel').hidden = false;
  $('place-name').focus();
}

async function deletePlace(place) {
  if (!window.confirm(`Delete ${place.name}?`)) return;
  try {
    await api('DELETE', `/api/places/${encodeURIComponent(place._id)}`);
    await loadPlaces();
  } catch (error) { $('place-error').textContent = error.message; }
}

// MARK: Corrections review, with the decisions taken and their undo

async function showReview() {
  const [waiting, approved, rejected] = await Promise.all(['submitted', 'approved', 'rejected']
    .map((status) => api('GET', `/api/adjustments?status=${status}`).then((answer) => answer.reports || [])));
  if (state.places.length === 0) state.places = await fetchPlaces();
  const names = new Map(state.places.map((place) => [place._id, place.name]));
  const nameOf = (report) => names.get(report.placeId) || report.placeId;
  $('review-summary').textContent = waiting.length === 0 ? 'Nothing waits for review.'
    : waiting.length === 1 ? '1 correction waits for review.' : `${waiting.length} corrections wait for review.`;
  $('review-legend').hidden = waiting.length === 0;
  $('review-list').replaceChildren(...waiting.map((report) => {
    const moved = distance([report.originalLatitude, report.originalLongitude], latLon(report));
    const item = element('li', `${nameOf(report)}: moved ${formatDistance(moved)} by ${report.submittedBy}, ${when(Date.parse(report.submittedDate))}${report.comment ? ` — “${report.comment}”` : ''} `, { 'data-id': report._id });
    item.appendChild(button('Show', () => showReport(report), { 'aria-label': `Show the correction of ${nameOf(report)}` }));
    item.appendChild(button('Approve', () => decide(report, 'approve', nameOf(report)), { 'aria-label': `Approve the correction of ${nameOf(report)}` }));
    item.appendChild(button('Reject', () => decide(report, 'reject', nameOf(report)), { 'aria-label': `Reject the correction of ${nameOf(report)}` }));
    return item;
  }));
  // The decisions already taken, newest first; each can be taken back.
  const reviewed = approved.concat(rejected).sort((a, b) => String(b.reviewedDate).localeCompare(String(a.reviewedDate))).slice(0, 50);
  $('review-history').replaceChildren(...(reviewed.length ? reviewed.map((report) => {
    const verb = report.reviewStatus === 'approved' ? 'approved (the place moved)' : 'rejected';
    const item = element('li', `${nameOf(report)}: ${verb} by ${report.reviewedBy}, ${when(Date.parse(report.reviewedDate))} `, { 'data-id': report._id });
    item.appendChild(button('Undo', () => decide(report, 'undo', nameOf(report)), { 'aria-label': `Undo the decision on ${nameOf(report)}` }));
    return item;
  }) : [element('li', 'No decision yet.', { class: 'empty' })]));
  if (waiting.length) showReport(waiting[0]);
}

// Both positions of a report, labelled on the map (A now, B reported), and the distance.
function showReport(report) {
  if (!state.layer) return;
  state.layer.clearLayers();
  const original = [report.originalLatitude, report.originalLongitude];
  const reported = latLon(report);
  marker(original, 'A', 'place', 'A: where the place is now').addTo(state.layer)
    .bindTooltip('A: now', { permanent: true, direction: 'left', offset: [-12, 0], className: 'pin-label' });
  marker(reported, 'B', 'reported', 'B: where the report puts it').addTo(state.layer)
    .bindTooltip('B: reported', { permanent: true, direction: 'right', offset: [12, 0], className: 'pin-label' });
  L.polyline([original, reported], { color: '#444', dashArray: '6 6' }).addTo(state.layer)
    .bindTooltip(formatDistance(distance(original, reported)), { permanent: true });
  state.fitted = false;
  fit([original, reported]);
}

async function decide(correction, decision, name) {
  try {
    await api('POST', `/api/adjustments/${encodeURIComponent(correction._id)}/${decision}`);
    await showReview();
    const done = { approve: `Approved: ${name} moved`, reject: `Rejected the correction of ${name}`,
      undo: `Undone: the correction of ${name} waits for review again${correction.reviewStatus === 'approved' ? ' and the place is back where it was' : ''}` }[decision];
    $('review-summary').textContent = `${done}. ` + $('review-summary').textContent;
  } catch (error) { $('review-summary').textContent = error.message; }
}

// MARK: Photos (GeoPix): location documents with image attachments

async function showPhotos() {
  const analyst = state.session.kind !== 'user';
  const form = $('photos-filter');
  form.hidden = !analyst;
  if (analyst && !form.dataset.ready) {
    form.dataset.ready = '1';
    form.addEventListener('submit', (event) => { event.preventDefault(); state.fitted = false; loadPhotos().catch(report); });
  }
  await loadPhotos();
}

async function loadPhotos() {
  const user = state.session.kind === 'user' ? '' : $('photos-user').value.trim();
  const query = new URLSearchParams({ limit: '500' });
  if (user) query.set('user', user);
  const answer = await api('GET', `/api/photos?${query}`);
  state.photos = answer.photos;
  const source = (photo) => `/api/photos/${encodeURIComponent(photo.id)}/${encodeURIComponent(photo.attachment)}` + (user ? `?user=${encodeURIComponent(user)}` : '');
  // Whose: the user's own; one user's; else the owner everyone's ids are kept under (<user>:<id>).
  const owner = (photo) => (state.session.kind === 'user' ? state.session.name : user || String(photo.id).split(':')[0]);
  const describe = (photo) => `${photo.caption || photo.attachment}, ${owner(photo)}, ${when(photo.time)}`;
  $('photos-summary').textContent = answer.total === 0
    ? (state.session.kind === 'user' ? 'No photos yet. Photos taken in the tracker app (/app/) show here with where they were taken.' : 'No photos.')
    : answer.total > answer.photos.length ? `The newest ${answer.photos.length} of ${answer.total} photos.` : `${answer.total} photos.`;
  const markers = new Map();
  const open = (photo) => openPhoto(photo, source(photo), owner(photo), markers.get(photo));
  $('photos-list').replaceChildren(...answer.photos.map((photo) => {
    const item = element('li', null, { 'data-id': photo.id });
    const opener = element('button', null, { type: 'button', class: 'photo-open', 'aria-label': `Open ${describe(photo)}` });
    opener.appendChild(element('img', null, { src: source(photo), alt: '', loading: 'lazy' }));
    opener.addEventListener('click', () => open(photo));
    item.append(opener, element('span', describe(photo)));
    return item;
  }));
  if (!state.layer) return;
  state.layer.clearLayers();
  // Photos at one spot cluster; at the closest zoom a cluster spreads out so each can be opened.
  const group = typeof L.markerClusterGroup === 'function' ? L.markerClusterGroup({ spiderfyOnMaxZoom: true, maxClusterRadius: 40 }) : L.layerGroup();
  state.photoGroup = group;
  state.photoMarkers = [];
  for (const photo of answer.photos) {
    const m = marker([photo.lat, photo.lon], '▣', 'photo', describe(photo));
    m.bindPopup(() => {
      const node = element('div', null, { class: 'photo-popup' });
      node.appendChild(element('img', null, { src: source(photo), alt: describe(photo) }));
      node.appendChild(element('div', describe(photo)));
      node.appendChild(button('Open', () => open(photo), { 'aria-label': `Open ${describe(photo)}` }));
      return node;
    }, { minWidth: 200 });
    markers.set(photo, m);
    state.photoMarkers.push(m);
    group.addLayer(m);
  }
  group.addTo(state.layer);
  fit(answer.photos.map((photo) => [photo.lat, photo.lon]));
}

// The photo viewer: the photo large, whose, when and where, and a way to its place on the map.
function openPhoto(photo, source, owner, mapMarker) {
  const viewer = $('photo-viewer');
  $('photo-title').textContent = photo.caption || photo.attachment;
  $('photo-image').src = source;
  $('photo-image').alt = `${photo.caption || photo.attachment}, taken by ${owner}`;
  $('photo-details').textContent = `Taken by ${owner}, ${when(photo.time)}, at ${photo.lat.toFixed(5)}, ${photo.lon.toFixed(5)}.`;
  if (!viewer.dataset.ready) {
    viewer.dataset.ready = '1';
    $('photo-close').addEventListener('click', () => viewer.close());
    viewer.addEventListener('click', (event) => { if (event.target === viewer) viewer.close(); });  // a tap beside it
  }
  $('photo-on-map').onclick = () => {
    viewer.close();
    if (!state.map) return;
    const group = state.photoGroup;
    if (mapMarker && group && group.zoomToShowLayer) {
      // Once the clusters have formed again at the new zoom: a cluster still holding this
      // photo opens (spread out at the closest zoom) to show it.
      state.map.once('moveend', () => setTimeout(() => group.zoomToShowLayer(mapMarker, () => mapMarker.openPopup()), 350));
    }
    state.map.setView([photo.lat, photo.lon], Math.max(state.map.getZoom(), 17), { animate: false });
    if (mapMarker && !(group && group.zoomToShowLayer)) mapMarker.openPopup();
    $('map').scrollIntoView({ block: 'nearest' });
  };
  viewer.showModal();
  $('photo-close').focus();
}

// MARK: Account (tracker users): password, devices, deleting the account

async function showAccount() {
  if (!$('password-form').dataset.ready) setUpAccount();
  const singleDatabase = state.session.mode === 'single-db';
  // What deleting does, in plain words: the two modes keep locations differently.
  $('delete-explained').textContent = singleDatabase
    ? 'Deleting your account deletes every location and photo you sent, and signs out every device at once. It cannot be undone.'
    : 'Deleting your account deletes your own database (every location and photo your devices sent) and signs out every device at once. '
      + 'Copies gathered for analysis stay, without your account, unless you tick the box below. It cannot be undone.';
  $('delete-purge-row').hidden = singleDatabase;
  await loadDevices();
}

async function loadDevices() {
  const keys = (await api('GET', '/api/keys')).keys || [];
  $('devices-list').replaceChildren(...(keys.length ? keys.map((key, i) => {
    const name = key.device || `Device ${i + 1} (no name given)`;
    const item = element('li', `${name}, signed in ${when(key.created_at)} `, { 'data-key': key.api_key });
    item.appendChild(button('Revoke', async () => {
      if (!window.confirm(`Revoke the key of ${name}? It stops sending locations until it signs in again.`)) return;
      try { await api('DELETE', `/api/keys/${encodeURIComponent(key.api_key)}`); await loadDevices(); } catch (error) { report(error); }
    }, { 'aria-label': `Revoke ${name}` }));
    return item;
  }) : [element('li', 'No device is signed in. Sign in on a phone with the tracker app (/app/).', { class: 'empty' })]));
}

// Back to the sign-in form, saying why.
function leave(message) {
  sessionStorage.setItem('lt-farewell', message);
  if (state.live) state.live.close();
  window.location.reload();
}

function setUpAccount() {
  $('password-form').dataset.ready = '1';
  $('password-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    $('password-error').textContent = '';
    if ($('new-password').value !== $('repeat-password').value) { $('password-error').textContent = 'The two new passwords differ.'; return; }
    try {
      await api('PUT', '/api/me/password', { current_password: $('current-password').value, new_password: $('new-password').value });
      leave('Your password is changed. Sign in with the new one; your phones stay signed in.');
    } catch (error) {
      $('password-error').textContent = error.status === 401 ? 'The current password is not right.' : error.message;
    }
  });
  $('import-form').addEventListener('submit', (event) => { event.preventDefault(); importHistory(); });
  $('delete-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    $('delete-error').textContent = '';
    if (!window.confirm('Delete your account and your locations for good?')) return;
    const name = state.session.name;
    const purge = !$('delete-purge-row').hidden && $('delete-purge').checked;
    // The user's own name and password (basic auth), as the API asks for a deletion.
    const response = await fetch(`/api/users/${encodeURIComponent(name)}${purge ? '?locations=purge' : ''}`, {
      method: 'DELETE', credentials: 'omit',
      headers: { Accept: 'application/json', Authorization: `Basic ${btoa(unescape(encodeURIComponent(`${name}:${$('delete-password').value}`)))}` },
    });
    if (response.ok) {
      await api('DELETE', '/api/session').catch(() => {});
      leave(`The account ${name} is deleted${purge ? ', with the copies gathered for analysis' : ''}.`);
    } else {
      const answer = await response.json().catch(() => ({}));
      $('delete-error').textContent = response.status === 401 ? 'The password is not right.' : (answer.reason || `${response.status} ${response.statusText}`);
    }
  });
}

// A history file streamed to /api/me/imports with the session (the tracker app's
// import-history.js, served at /app/, does the rest).
function importHistory() {
  const file = $('import-file').files[0];
  if (!file) return;
  self.ltImportHistory(file, {
    headers: { 'X-Requested-With': 'lt-dashboard' }, bar: $('import-progress'), status: $('import-status'),
    error: $('import-error'), button: $('import-form').querySelector('button'),
  });
}

// MARK: All locations (admins and analysts)

// The map of everyone's locations: the server counts them on a grid over what the map shows
// (so a million locations cost a few kilobytes per view); points themselves when few.
let gridRequest = 0;
async function drawLocationGrid() {
  if (!state.map || state.view !== 'analysis') return;
  const map = state.map, bounds = map.getBounds(), size = map.getSize();
  let west = bounds.getWest(), east = bounds.getEast();
  if (east - west >= 360) { west = -180; east = 180; } else {
    west = ((west + 540) % 360) - 180;
    east = ((east + 540) % 360) - 180;
  }
  const south = Math.max(-90, bounds.getSouth()), north = Math.min(90, bounds.getNorth());
  const columns = Math.max(1, Math.min(200, Math.round(size.x / 64))), rows = Math.max(1, Math.min(200, Math.round(size.y / 64)));
  const query = analysisQuery();
  query.set('bbox', [west, south, east, north].map((v) => v.toFixed(6)).join(','));
  query.set('columns', columns);
  query.set('rows', rows);
  query.set('points', '500');
  const ticket = ++gridRequest;
  const grid = await api('GET', `/api/analysis/map?${query}`);
  if (ticket !== gridRequest || state.view !== 'analysis') return;
  state.grid = grid;
  state.layer.clearLayers();
  $('analysis-count').textContent = `${grid.total.toLocaleString()} locations in view.`;
  const heat = $('analysis-heat').checked;
  const width = (east >= west ? east - west : east + 360 - west) / columns, height = (north - south) / rows;
  const largest = grid.cells.reduce((n, cell) => Math.max(n, cell[2]), 1);
  // What the heat map's shades mean: from one location in a square (light) to the most (dark).
  $('heat-legend').hidden = !heat || grid.cells.length === 0;
  $('heat-range').textContent = `locations per square: 1 (light) to ${largest.toLocaleString()} (dark)`;
  if (grid.points.length && !heat) {
    for (const [lat, lon, id, time] of grid.points) {
      L.circleMarker([lat, lon], { radius: 5, color: '#1f6feb', weight: 1, fillOpacity: 0.8 })
        .bindTooltip(() => element('span', `${id}${time ? ` — ${when(time)}` : ''}`)).addTo(state.layer);
    }
  } else {
    for (const [row, column, count, lat, lon] of grid.cells) {
      if (heat) {
        const south0 = south + row * height, west0 = west + column * width;
        const strength = Math.log(1 + count) / Math.log(1 + largest);
        L.rectangle([[south0, west0], [south0 + height, west0 + width]], { stroke: false, fillColor: '#d9480f', fillOpacity: 0.1 + 0.7 * strength })
          .bindTooltip(`${count}`).addTo(state.layer);
      } else {
        const px = Math.round(24 + 10 * Math.log10(count));
        const icon = L.divIcon({ className: 'cluster', html: '', iconSize: [px, px] });
        const m = L.marker([lat, lon], { icon, title: `${count} locations`, keyboard: true });
        m.on('add', () => { const node = m.getElement(); if (node) node.textContent = count >= 10000 ? `${Math.round(count / 1000)}k` : String(count); });
        m.on('click', () => map.setView([lat, lon], Math.min(map.getZoom() + 2, 18)));
        m.addTo(state.layer);
      }
    }
  }
}

// Fits the map to every location the filter keeps (the server's bounds of them), then draws
// them: on opening the view and after each change of the filter.
async function fitAnalysis() {
  if (!state.map) return;
  const query = analysisQuery();
  query.set('columns', '1');
  query.set('rows', '1');
  const ticket = ++gridRequest;
  const whole = await api('GET', `/api/analysis/map?${query}`);
  if (ticket !== gridRequest || state.view !== 'analysis') return;
  state.analysisBounds = whole.bounds;
  state.fitted = true;
  if (whole.bounds) {
    let [west, south, east, north] = whole.bounds;
    if (east < west) east += 360;  // across the antimeridian
    if (west === east && south === north) state.map.setView([south, west], 15, { animate: false });
    else state.map.fitBounds([[south, west], [north, east]], { padding: [30, 30], maxZoom: 17, animate: false });
  }
  await drawLocationGrid();
}

function analysisQuery() {
  const query = new URLSearchParams();
  const user = $('analysis-user').value.trim();
  if (user) query.set('user', user);
  const from = msFrom($('analysis-from')), to = msFrom($('analysis-to'));
  if (from) query.set('from', from);
  if (to) query.set('to', to);
  return query;
}

async function showAnalysis() {
  const form = $('analysis-filter');
  if (state.map && !state.map.ltGridListener) {
    state.map.ltGridListener = true;
    state.map.on('moveend', () => { drawLocationGrid().catch(report); });
    $('analysis-heat').addEventListener('change', () => { drawLocationGrid().catch(report); });
  }
  const update = () => {
    state.fitted = false;
    fitAnalysis().catch(report);
    const query = analysisQuery();
    const user = $('analysis-user').value.trim();
    for (const format of ['geojson', 'gpx', 'csv']) {
      query.set('format', format);
      $(`export-${format}`).href = `/api/analysis/locations?${query}`;
    }
    $('analysis-stats').textContent = '';
    if (user) {
      api('GET', `/api/analysis/users/${encodeURIComponent(user)}/stats`).then((stats) => {
        $('analysis-stats').textContent = `${user}: ${stats.count} locations` + (stats.count ? `, ${when(stats.first)} to ${when(stats.last)}, ${formatDistance(stats.distance_m || 0)} travelled.` : '.');
      }).catch((error) => { $('analysis-stats').textContent = error.message; });
    }
  };
  if (!form.dataset.ready) {
    form.dataset.ready = '1';
    form.addEventListener('change', update);
    form.addEventListener('submit', (event) => { event.preventDefault(); update(); });
  }
  update();
  if (state.session.kind === 'admin') showConsolidation().catch(report);
}

// Where copying users' locations into lt_locations_all stands (admins): GET /api/status.
async function showConsolidation() {
  const line = $('consolidation-status');
  const status = (await api('GET', '/api/status')).consolidation;
  line.hidden = false;
  if (!status) { line.textContent = 'Everyone\'s phones write to one shared database, which is what you see here: nothing to gather.'; return; }
  const waiting = status.backlog.sweep_remaining + status.backlog.databases_retrying;
  // In words a user knows: each person's phone writes to their own database; the server
  // gathers copies of every location here for analysis (technically: consolidation).
  let text = `Gathered here for analysis: ${status.documents_copied.toLocaleString()} locations from everyone's phones; ` +
    (waiting ? `${waiting} ${waiting === 1 ? 'person has' : 'people have'} new locations still to gather.` : 'nothing left to gather.');
  if (status.unreadable.length) text += ` Cannot read the locations of: ${status.unreadable.join(', ')}.`;
  if (status.refused.length) {
    const first = status.refused[0];
    text += ` ${status.refused.length} location${status.refused.length === 1 ? '' : 's'} could not be gathered yet and will be tried again (first: ${first.database}/${first.id}: ${first.reason || first.error}).`;
  }
  line.textContent = text;
  line.classList.toggle('error', !status.ok);
}

start().catch((error) => { document.body.appendChild(element('p', `The dashboard could not start: ${error.message}`, { role: 'alert', class: 'error' })); });
