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
const metres = (m) => (m < 1000 ? `${m.toFixed(0)} m` : `${(m / 1000).toFixed(2)} km`);
const when = (ms) => new Date(ms).toLocaleString();
const msFrom = (input) => (input.value ? String(new Date(input.value).getTime()) : null);

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
  state.config = await api('GET', 'config.json');
  const who = await api('GET', '/api/session');
  if (who && who.name) enter(who); else $('sign-in').hidden = false;
  $('sign-in-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    $('sign-in-error').textContent = '';
    try {
      enter(await api('POST', '/api/session', { username: $('username').value, password: $('password').value }));
    } catch (error) {
      $('sign-in-error').textContent = error.status === 401 ? 'Name or password is incorrect.' : error.message;
    }
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
  // A view named in the address (#tracks, #places, #review, #analysis, #photos), if allowed.
  const named = document.querySelector(`#views button[data-view="${window.location.hash.slice(1)}"]`);
  show(named && !named.hidden ? named.dataset.view : session.kind === 'user' ? 'tracks' : session.kind === 'admin' ? 'places' : 'analysis');
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
  if (state.layer) state.map.removeLayer(state.layer);
  if (state.map) state.layer = L.layerGroup().addTo(state.map);
  if (view !== 'tracks' && state.live) { state.live.close(); state.live = null; }
  ({ tracks: showTracks, places: showPlaces, review: showReview, analysis: showAnalysis, photos: showPhotos })[view]().catch(report);
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
  if (points.length === 1) state.map.setView(points[0], 13); else state.map.fitBounds(points, { padding: [30, 30] });
}

// MARK: My tracks

async function showTracks() {
  const form = $('track-filter');
  if (!form.dataset.ready) {
    form.dataset.ready = '1';
    form.addEventListener('submit', (event) => { event.preventDefault(); state.fitted = false; loadTrack().catch(report); });
  }
  await loadTrack();
  if (!state.live) {
    state.live = new EventSource('/api/me/live');
    state.live.addEventListener('location', (event) => {
      const doc = JSON.parse(event.data);
      if (state.track.some((known) => known._id === doc._id)) return;
      state.track.push(doc);
      const limit = Number($('track-limit').value) || 100;
      if (state.track.length > limit) state.track.splice(0, state.track.length - limit);
      drawTrack();
    });
  }
}

async function loadTrack() {
  const query = new URLSearchParams({ limit: $('track-limit').value || '100' });
  const from = msFrom($('track-from')), to = msFrom($('track-to'));
  if (from) query.set('from', from);
  if (to) query.set('to', to);
  state.track = (await api('GET', `/api/me/locations?${query}`)).locations;
  drawTrack();
}

function drawTrack() {
  const points = state.track.map(latLon);
  const list = $('track-list');
  list.replaceChildren(...state.track.map((doc, i) => element('li', `${when(doc.created_at)} — ${latLon(doc)[0].toFixed(5)}, ${latLon(doc)[1].toFixed(5)}${doc.properties && doc.properties.background ? ' (background)' : ''}`, { 'data-id': doc._id })));
  $('track-summary').textContent = points.length ? `${points.length} locations, the newest ${when(state.track[state.track.length - 1].created_at)}.` : 'No locations yet.';
  if (state.layer) {
    state.layer.clearLayers();
    drawPath(points, state.track.map((doc) => doc.created_at));
    fit(points);
  }
  if (points.length) loadNearbyPlaces(points[points.length - 1]).catch(report);
  else $('track-places').replaceChildren();
}

// A track as a line read at a glance: the path with arrows along it (direction), each fix a
// small dot (clustered where they crowd), the start and the latest position marked.
function drawPath(points, times) {
  if (points.length > 1) {
    L.polyline(points, { color: '#1f6feb', weight: 4, opacity: 0.85, className: 'track-line' }).addTo(state.layer);
    for (const arrow of directionArrows(points)) arrow.addTo(state.layer);
  }
  const fixes = typeof L.markerClusterGroup === 'function'
    ? L.markerClusterGroup({ showCoverageOnHover: false, maxClusterRadius: 30, disableClusteringAtZoom: 18 })
    : L.layerGroup();
  const dot = L.divIcon({ className: 'fix', iconSize: [10, 10] });
  points.slice(0, -1).forEach((point, i) => {
    const label = `Location ${i + 1}, ${when(times[i])}`;
    fixes.addLayer(L.marker(point, { icon: dot, title: label, alt: label, keyboard: false }));
  });
  fixes.addTo(state.layer);
  state.fixes = fixes;
  if (points.length > 1) marker(points[0], 'S', 'start', `Start, ${when(times[0])}`).setZIndexOffset(1000).addTo(state.layer);
  if (points.length) {
    const last = points.length - 1;
    marker(points[last], '●', 'latest', `Latest location, ${when(times[last])}`).setZIndexOffset(2000).addTo(state.layer);
    L.circle(points[last], { radius: state.config.place_radius, color: '#2f9e44', fill: false, weight: 1 }).addTo(state.layer);
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
  $('track-places').replaceChildren(...rows.map((row) => element('li', `${row.doc.name} — ${metres(distance(position, latLon(row.doc)))}`)));
  if (state.layer && state.view === 'tracks') {
    for (const row of rows) marker(latLon(row.doc), '★', 'place', row.doc.name).addTo(state.layer);
  }
}

// MARK: Places

async function showPlaces() {
  const admin = state.session.kind === 'admin';
  $('place-form').hidden = !admin;
  if (admin && !$('place-form').dataset.ready) setUpPlaceForm();
  await loadPlaces();
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

// MARK: Corrections review

async function showReview() {
  const reports = (await api('GET', '/api/adjustments?status=submitted')).reports || [];
  if (state.places.length === 0) state.places = await fetchPlaces();
  const names = new Map(state.places.map((place) => [place._id, place.name]));
  $('review-summary').textContent = reports.length === 0 ? 'Nothing waits for review.'
    : reports.length === 1 ? '1 correction waits for review.' : `${reports.length} corrections wait for review.`;
  $('review-list').replaceChildren(...reports.map((report) => {
    const original = [report.originalLatitude, report.originalLongitude];
    const reported = latLon(report);
    const moved = distance(original, reported);
    const item = element('li', `${names.get(report.placeId) || report.placeId}: moved ${metres(moved)} by ${report.submittedBy}, ${new Date(report.submittedDate).toLocaleString()}${report.comment ? ` — “${report.comment}”` : ''} `, { 'data-id': report._id });
    item.appendChild(button('Show', () => showReport(report), { 'aria-label': `Show the correction of ${names.get(report.placeId) || report.placeId}` }));
    item.appendChild(button('Approve', () => decide(report, 'approve'), { 'aria-label': `Approve the correction of ${names.get(report.placeId) || report.placeId}` }));
    item.appendChild(button('Reject', () => decide(report, 'reject'), { 'aria-label': `Reject the correction of ${names.get(report.placeId) || report.placeId}` }));
    return item;
  }));
  if (reports.length) showReport(reports[0]);
}

function showReport(report) {
  if (!state.layer) return;
  state.layer.clearLayers();
  const original = [report.originalLatitude, report.originalLongitude];
  const reported = latLon(report);
  marker(original, 'A', 'place', 'Original position').addTo(state.layer);
  marker(reported, 'B', 'reported', 'Reported position').addTo(state.layer);
  L.polyline([original, reported], { color: '#444', dashArray: '6 6' }).addTo(state.layer)
    .bindTooltip(metres(distance(original, reported)), { permanent: true });
  state.fitted = false;
  fit([original, reported]);
}

async function decide(correction, decision) {
  try {
    await api('POST', `/api/adjustments/${encodeURIComponent(correction._id)}/${decision}`);
    await showReview();
    $('review-summary').textContent = `${decision === 'approve' ? 'Approved: the place moved' : 'Rejected'}. ` + $('review-summary').textContent;
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
  const describe = (photo) => `${photo.caption || photo.attachment}, ${when(photo.time)}`;
  $('photos-summary').textContent = answer.total > answer.photos.length ? `The newest ${answer.photos.length} of ${answer.total} photos.` : `${answer.total} photos.`;
  $('photos-list').replaceChildren(...answer.photos.map((photo) => {
    const item = element('li', null, { 'data-id': photo.id });
    const image = element('img', null, { src: source(photo), alt: describe(photo), loading: 'lazy' });
    image.addEventListener('click', () => { if (state.map) state.map.setView([photo.lat, photo.lon], 16); });
    item.appendChild(image);
    item.appendChild(element('span', describe(photo)));
    return item;
  }));
  if (!state.layer) return;
  state.layer.clearLayers();
  const group = typeof L.markerClusterGroup === 'function' ? L.markerClusterGroup() : L.layerGroup();
  state.photoGroup = group;
  state.photoMarkers = [];
  for (const photo of answer.photos) {
    const m = marker([photo.lat, photo.lon], '▣', 'photo', describe(photo));
    m.bindPopup(() => {
      const node = element('div', null, { class: 'photo-popup' });
      node.appendChild(element('img', null, { src: source(photo), alt: describe(photo) }));
      node.appendChild(element('div', describe(photo)));
      return node;
    }, { minWidth: 200 });
    state.photoMarkers.push(m);
    group.addLayer(m);
  }
  group.addTo(state.layer);
  fit(answer.photos.map((photo) => [photo.lat, photo.lon]));
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
  if (!state.fitted && grid.cells.length) {
    state.fitted = true;
    const centers = grid.cells.map((cell) => [cell[3], cell[4]]);
    if (centers.length > 1) map.fitBounds(centers, { padding: [40, 40], maxZoom: 14 }); else map.setView(centers[0], 12);
  }
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
  if (state.map) state.map.setView([20, 0], 2);
  const update = () => {
    state.fitted = false;
    drawLocationGrid().catch(report);
    const query = analysisQuery();
    const user = $('analysis-user').value.trim();
    for (const format of ['geojson', 'gpx', 'csv']) {
      query.set('format', format);
      $(`export-${format}`).href = `/api/analysis/locations?${query}`;
    }
    $('analysis-stats').textContent = '';
    if (user) {
      api('GET', `/api/analysis/users/${encodeURIComponent(user)}/stats`).then((stats) => {
        $('analysis-stats').textContent = `${user}: ${stats.count} locations` + (stats.count ? `, ${when(stats.first)} to ${when(stats.last)}, ${metres(stats.distance_m || 0)} travelled.` : '.');
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
  if (!status) { line.textContent = 'Every user\'s locations are in one database: nothing to consolidate.'; return; }
  const waiting = status.backlog.sweep_remaining + status.backlog.databases_retrying;
  let text = `Consolidation: ${status.documents_copied.toLocaleString()} locations copied; ` +
    (waiting ? `${waiting} user database${waiting === 1 ? '' : 's'} waiting.` : 'nothing waiting.');
  if (status.unreadable.length) text += ` Cannot read: ${status.unreadable.join(', ')}.`;
  if (status.refused.length) {
    const first = status.refused[0];
    text += ` ${status.refused.length} location${status.refused.length === 1 ? '' : 's'} refused, retried until copied (first: ${first.database}/${first.id}: ${first.reason || first.error}).`;
  }
  line.textContent = text;
  line.classList.toggle('error', !status.ok);
}

start().catch((error) => { document.body.appendChild(element('p', `The dashboard could not start: ${error.message}`, { role: 'alert', class: 'error' })); });
