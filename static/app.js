// Entry point of the demo page: restores what this browser kept, wires the modules (composer,
// jobs, job-card, live, live mode, store) together and starts the live updates.

import { focusText, initComposer, livePlayOn, loadVoices } from "./composer.js";
import { initJobList, renderJob, renderList } from "./job-card.js";
import { initJobActions } from "./jobs.js";
import { initLiveMode } from "./live-mode.js";
import { mergeFromServer, mergeFromStorage, player, startFeed, startPolling } from "./live.js";
import { records, saveNow, STORE_JOBS, storedRecords } from "./store.js";

const HISTORY_FROM_SERVER = 50; // newest jobs asked of GET /v1/tts/jobs on load

initComposer();
initLiveMode();
for (const rec of storedRecords()) records.set(rec.id, rec);
renderList();
mergeFromServer(HISTORY_FROM_SERVER); // what this browser did not keep of this client's jobs
initJobActions({ autoplay: livePlayOn, afterClear: focusText });

// One sound at a time: playing anything stops the rest.
document.addEventListener("play", (event) => {
  for (const a of document.querySelectorAll("audio")) if (a !== event.target) a.pause();
  player.stopAll();
}, true);
// The tabs share the history; what is pending is kept when the page goes away.
window.addEventListener("storage", (event) => {
  if (event.key === STORE_JOBS) mergeFromStorage();
});
window.addEventListener("pagehide", saveNow);

// Diagnostics for people and browser tests (read-only): what live playback scheduled for a job,
// as [{at, duration, late}] on the AudioContext's clock, and the context's state.
window.chatttsOnline = Object.freeze({
  liveTimeline: (jobId) => player.timeline(jobId),
  audioState: () => player.ctx?.state ?? "none",
});

startFeed();
loadVoices().then(() => {
  for (const rec of records.values()) renderJob(rec); // voice labels may have changed
});
startPolling();
initJobList();
