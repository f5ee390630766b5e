// A location history file sent to `POST /api/me/imports` as it is read, its progress polled
// from the list of imports while it runs, its summary shown at the end. Used by the tracker
// app's "Bring your history" (with the phone's key) and the dashboard's "Import a history"
// (with its session), each passing its credentials' headers and its page's elements.
'use strict';

self.ltImportHistory = async function importHistory(file, { headers, bar, status, error, button }) {
  error.textContent = '';
  status.textContent = `Sending ${file.name}…`;
  bar.hidden = false;
  bar.value = 0;
  button.disabled = true;
  const poll = setInterval(async () => {
    try {
      const response = await fetch('/api/me/imports', { headers: Object.assign({ Accept: 'application/json' }, headers) });
      const running = ((await response.json()).imports || []).find((job) => job.state === 'running' && job.file_name === file.name);
      if (!running) return;
      bar.value = file.size ? Math.min(1, running.bytes_read / file.size) : 0;
      status.textContent = `Importing ${file.name}: ${running.written} locations stored, ${running.duplicates} already there…`;
    } catch (failure) { /* the next poll tries again */ }
  }, 500);
  try {
    const response = await fetch(`/api/me/imports?name=${encodeURIComponent(file.name)}`, {
      method: 'POST', body: file, credentials: 'same-origin',
      headers: Object.assign({ Accept: 'application/json', 'Content-Type': 'application/octet-stream' }, headers),
    });
    const job = await response.json().catch(() => ({}));
    const skipped = Object.entries(job.skipped || {}).map(([reason, count]) => `${count} ${reason}`).join('; ');
    const counts = `${job.written || 0} locations stored, ${job.duplicates || 0} already there${skipped ? `, skipped: ${skipped}` : ''}`;
    const entries = job.entries || [];
    if (job.state === 'done') {
      bar.value = 1;
      const what = job.format === 'zip' ? `a ZIP archive, ${entries.length} location file${entries.length === 1 ? '' : 's'}` : job.format;
      status.textContent = `${file.name} (${what}): ${counts}.`;
      error.textContent = entries.filter((entry) => entry.error).map((entry) => entry.error).join(' · ');
    } else {
      status.textContent = job.written ? `Before it stopped: ${counts}.` : '';
      error.textContent = job.error || job.reason || `${response.status} ${response.statusText}`;
    }
  } catch (failure) {
    error.textContent = failure instanceof TypeError ? 'The server cannot be reached: try again when there is a network.' : failure.message;
  } finally {
    clearInterval(poll);
    button.disabled = false;
  }
};
