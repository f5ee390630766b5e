// The tracker's service worker: keeps the app's own files so it opens without a network, and
// takes a new version of them when the server has one. API and database requests are never
// cached (they go to the network; the app keeps its data in IndexedDB).
'use strict';

const CACHE = 'lt-app-v3';
const SHELL = ['./', 'index.html', 'app.js', 'store.js', 'import-history.js', 'app.css', 'manifest.webmanifest', 'icon.svg', 'icon-192.png', 'icon-512.png'];

// The shell, and the map's configuration and the Leaflet files it names, so the map opens offline too.
self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    await cache.addAll(SHELL);
    try {
      const response = await fetch('config.json');
      const config = await response.clone().json();
      await cache.put('config.json', response);
      await cache.addAll([config.leaflet, config.leaflet_css].filter(Boolean));
    } catch (error) { /* no map offline; the rest works */ }
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((names) => Promise.all(names.filter((name) => name !== CACHE).map((name) => caches.delete(name))))
    .then(() => self.clients.claim()));
});

// The app's files: from the network when it answers (and kept for next time), else from the
// cache; so an update shows at the next start online, and the app still opens offline.
self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin || !url.pathname.startsWith('/app/')) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const response = await fetch(event.request);
      if (response.ok) cache.put(event.request, response.clone());
      return response;
    } catch (error) {
      const cached = await cache.match(event.request, { ignoreSearch: true });
      if (cached) return cached;
      throw error;
    }
  })());
});
