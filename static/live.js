// Live updates: the event feed and its connection status, what each event or polled snapshot
// does to a job, playback of segments as they arrive, and waiting for a job to end.

import { api, ApiError, EventFeed, TERMINAL } from "./api.js";
import { excerpt, formatSeconds, nowS } from "./format.js";
import { playFinal, renderJob, renderList, renderLive } from "./job-card.js";
import { announce } from "./notices.js";
import { LivePlayer } from "./player.js";
import {
  forgottenIds, isActive, keepCursorOf, records, scheduleSave, sortedRecords, stateOf, storedCursor,
  storedRecords,
} from "./store.js";

const MAX_TIMELINE = 80;
const FRESH_S = 15; // an event younger than this is "live", not history replayed on load
const POLL_MS = 2500;

const $ = (id) => document.getElementById(id);
const conn = $("conn");
const connText = $("conn-text");
const banner = $("conn-banner");

export const player = new LivePlayer({ onChange: onLiveChange });

const orphans = new Map(); // events of jobs not (yet) in the list: id -> [[type, data, id]]
const previews = new Set(); // ids of voice preview jobs (not in the list)
const waiters = new Map(); // job id -> [resolve] (until terminal)
let feed = null;

export const feedIsOpen = () => feed?.state === "open";

/** Open the event stream where this browser left off. */
export function startFeed() {
  // No cursor yet: replay the last two minutes, enough to cover a job submitted in another tab.
  feed = new EventFeed({
    cursor: storedCursor() || `${Date.now() - 120000}-0`,
    onEvent: (type, data, id) => {
      onFeedEvent(type, data, id);
      scheduleSave();
    },
    onStatus: onFeedStatus,
  });
  keepCursorOf(() => feed.cursor);
  feed.start();
}

export function startPolling() {
  poll();
  setInterval(poll, POLL_MS);
}

// ---------------------------------------------------------------------------------------------
// Events and snapshots

function onFeedEvent(type, data, eventId) {
  const snap = data.job;
  if (!snap || typeof snap.id !== "string") return;
  if (previews.has(snap.id)) {
    settleWaiters(snap);
    return;
  }
  const rec = records.get(snap.id);
  if (!rec) {
    if (!orphans.has(snap.id) && orphans.size > 200) orphans.delete(orphans.keys().next().value);
    const list = orphans.get(snap.id) || [];
    list.push([type, data, eventId]);
    orphans.set(snap.id, list.slice(-MAX_TIMELINE));
    return;
  }
  applyEvent(rec, type, data, eventId);
  scheduleSave();
}

/** Apply the events that arrived before the job was in the list (another tab, a fast worker). */
export function replayOrphans(rec) {
  const list = orphans.get(rec.id);
  if (!list) return;
  orphans.delete(rec.id);
  for (const [type, data, eventId] of list) applyEvent(rec, type, data, eventId);
}

function applyEvent(rec, type, data, eventId) {
  if (eventId && rec.timeline.some((t) => t.id === eventId)) return;
  const entry = { type, ts: typeof data.ts === "number" ? data.ts : nowS(), id: eventId || null };
  const seg = data.segment;
  if (type === "progress" && seg && Number.isFinite(seg.index)) {
    entry.seg = [seg.index, seg.total];
  }
  rec.stamp = (rec.stamp || 0) + 1;
  rec.timeline.push(entry);
  if (rec.timeline.length > MAX_TIMELINE) {
    const drop = rec.timeline.findIndex((t, i) => t.type === "progress" && i > 0);
    rec.timeline.splice(drop > 0 ? drop : 0, 1);
  }
  const live = nowS() - entry.ts < FRESH_S;
  if (live && TERMINAL.has(data.job.state)) rec.fresh = true;
  applySnapshot(rec, data.job, undefined, { announce: live, reopen: data.requeued === true });
  if (type === "progress" && entry.seg && player.has(rec.id)) {
    player.segment(rec.id, entry.seg[0], entry.seg[1]);
  }
}

export function applySnapshot(rec, snap, position, options = {}) {
  const { announce: speak = false, reopen = false } = options;
  if (position !== undefined) rec.position = position;
  const before = rec.snap;
  // Terminal states are absorbing: a late answer never takes a finished job back. Only an
  // operator's requeue of a dead job (its `queued` event says `requeued`) starts it again.
  if (before && TERMINAL.has(before.state) && !TERMINAL.has(snap.state) && !reopen) {
    renderJob(rec);
    return;
  }
  rec.snap = { ...snap };
  rec.expired = false;
  const prev = before?.state;
  const state = snap.state;
  if (state !== "queued") rec.position = null;
  if (TERMINAL.has(state)) rec.cancelPending = false;
  if (prev !== state) {
    if (speak) announceState(rec);
    if (TERMINAL.has(state)) onTerminal(rec);
  }
  settleWaiters(rec.snap);
  renderJob(rec);
}

function announceState(rec) {
  const s = rec.snap;
  const what = `“${excerpt(rec.text, 32)}”`;
  const messages = {
    queued: `Job ${what} is queued.`,
    running: `Job ${what} started.`,
    succeeded: `Job ${what} is ready${s.duration_s ? `: ${formatSeconds(s.duration_s)} of audio` : ""}.`,
    failed: `Job ${what} failed${s.error ? `: ${s.error}` : ""}.`,
    dead: `Job ${what} failed for good${s.error ? `: ${s.error}` : ""}.`,
    cancelled: `Job ${what} was cancelled.`,
  };
  if (messages[s.state]) announce(messages[s.state]);
}

function onTerminal(rec) {
  const s = rec.snap;
  if (s.state === "succeeded") {
    if (player.jobs.has(rec.id)) {
      const total = s.segments_total || 0;
      if (total > 1) player.segment(rec.id, total, total);
      const { covered, resumeAt } = player.finish(rec.id, { succeeded: true });
      if (!covered) playFinal(rec, resumeAt);
    } else if (rec.autoplay) {
      playFinal(rec, 0);
    }
  } else {
    player.finish(rec.id, { succeeded: false });
  }
  rec.autoplay = false;
}

/**
 * This client's jobs as the server lists them (newest first), added where this browser kept
 * nothing of them (its storage cleared, a private window): the text as the list gives it
 * (its start only for long ones), never a job a person removed from the list.
 */
export async function mergeFromServer(limit) {
  let body;
  try {
    body = await api.myJobs(limit);
  } catch {
    return; // the kept history stays as it is
  }
  const forgotten = forgottenIds();
  let changed = false;
  for (const job of Array.isArray(body?.jobs) ? body.jobs : []) {
    if (!job || typeof job.id !== "string" || typeof job.text !== "string") continue;
    if (records.has(job.id) || forgotten.has(job.id)) continue;
    const rec = {
      id: job.id, text: job.text, params: { voice: job.voice, format: job.format }, snap: null,
      position: job.position ?? null, timeline: [], submittedAt: job.created_at || nowS(),
      expired: false, partial: Boolean(job.text_truncated), fresh: false, autoplay: false,
      cancelPending: false, actionError: null,
    };
    records.set(job.id, rec);
    applySnapshot(rec, job);
    changed = true;
  }
  if (changed) {
    renderList();
    scheduleSave();
  }
}

/** Another tab changed the kept history: add its jobs, take its longer timelines. */
export function mergeFromStorage() {
  let changed = false;
  for (const incoming of storedRecords()) {
    const rec = records.get(incoming.id);
    if (!rec) {
      records.set(incoming.id, incoming);
      replayOrphans(incoming);
      changed = true;
    } else if (incoming.snap && incoming.timeline.length > rec.timeline.length) {
      // Another tab heard more events of this job than we did.
      rec.timeline = incoming.timeline;
      applySnapshot(rec, incoming.snap);
    }
  }
  if (changed) renderList();
}

// ---------------------------------------------------------------------------------------------
// Live playback status

function onLiveChange(id, status) {
  const rec = records.get(id);
  if (!rec) return;
  rec.liveStatus = status;
  renderLive(rec);
  if (status === "playing") {
    for (const a of document.querySelectorAll("audio")) a.pause();
  }
  if (status === "broken" && rec.snap?.state === "succeeded") {
    const s = player.jobs.get(id);
    const at = s ? s.playedS : 0;
    player.forget(id);
    playFinal(rec, at);
  }
}

// ---------------------------------------------------------------------------------------------
// Waiting for a job to end (voice previews, which are not in the list)

function settleWaiters(snap) {
  if (!TERMINAL.has(snap.state)) return;
  const list = waiters.get(snap.id);
  if (!list) return;
  waiters.delete(snap.id);
  for (const resolve of list) resolve(snap);
}

function waitTerminal(id, timeoutMs = 60000) {
  return new Promise((resolve, reject) => {
    const list = waiters.get(id) || [];
    list.push(resolve);
    waiters.set(id, list);
    // A backstop for a stream that is down: ask directly now and then.
    const started = Date.now();
    const check = async () => {
      if (!waiters.has(id)) return;
      if (Date.now() - started > timeoutMs) {
        waiters.delete(id);
        reject(new ApiError({ kind: "unavailable", title: "No answer", message: "The job did not finish in time." }));
        return;
      }
      try {
        const res = await api.get(id);
        const snap = res.job && typeof res.job === "object" ? res.job : res;
        settleWaiters({ ...snap, id });
      } catch (err) {
        if (err.kind === "not_found") {
          waiters.delete(id);
          reject(err);
          return;
        }
      }
      setTimeout(check, 1500);
    };
    setTimeout(check, 1500);
  });
}

/** Follow a preview job just submitted (its events stay out of the list) to its final snapshot. */
export function followPreview(id, job, timeoutMs) {
  previews.add(id);
  const early = orphans.get(id);
  orphans.delete(id);
  const waiting = waitTerminal(id, timeoutMs);
  if (early) for (const [, data] of early) settleWaiters(data.job);
  if (job && TERMINAL.has(job.state)) settleWaiters({ ...job, id });
  return waiting;
}

// ---------------------------------------------------------------------------------------------
// Polling: what the stream may not tell (queue positions) or cannot (while it is down)

async function poll() {
  const streamUp = feedIsOpen();
  const targets = sortedRecords()
    .filter((r) => isActive(r) && (!streamUp || stateOf(r) === "queued"))
    .slice(0, 10);
  await Promise.all(targets.map(refreshJob));
}

export async function refreshJob(rec) {
  const stamp = rec.stamp || 0;
  try {
    const res = await api.get(rec.id);
    const snap = res.job && typeof res.job === "object" ? res.job : res;
    if (!records.has(rec.id)) return;
    if ((rec.stamp || 0) !== stamp) {
      // An event arrived meanwhile: it is newer than this answer; keep only the position.
      if (stateOf(rec) === "queued" && snap.state === "queued") rec.position = res.position ?? null;
      renderJob(rec);
      return;
    }
    applySnapshot(rec, { ...snap, id: rec.id }, res.position ?? null);
    scheduleSave();
  } catch (err) {
    if (err instanceof ApiError && err.kind === "not_found" && records.has(rec.id)) {
      rec.expired = true;
      player.forget(rec.id);
      renderJob(rec);
      scheduleSave();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Connection status (the pill in the top bar and the banner under it)

let connAnnouncedDown = false;
let bannerTimer = null;
let bannerCountdown = null;

function onFeedStatus(state, detail) {
  clearInterval(bannerCountdown);
  if (state === "open") {
    setConn("live", "Live");
    if (detail.resumed) {
      showBanner("ok", "Reconnected — caught up on everything that happened meanwhile.");
      clearTimeout(bannerTimer);
      bannerTimer = setTimeout(hideBanner, 5000);
      announce("Live updates resumed.");
    } else {
      hideBanner();
    }
    connAnnouncedDown = false;
    poll();
    return;
  }
  if (!connAnnouncedDown) {
    announce("Live updates interrupted. Reconnecting…");
    connAnnouncedDown = true;
  }
  clearTimeout(bannerTimer);
  if (state === "reconnecting") {
    setConn("down", "Reconnecting…");
    showBanner("warn", "Live updates interrupted — reconnecting. Your jobs keep running on the server.");
  } else {
    setConn("down", "Offline");
    const until = Date.now() + (detail.retryInMs || 0);
    const paint = () => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      showBanner("warn", left > 0
        ? `Cannot reach the live updates. Retrying in ${left} s — your jobs keep running on the server.`
        : "Cannot reach the live updates. Retrying now…");
    };
    paint();
    bannerCountdown = setInterval(paint, 1000);
  }
}

function setConn(state, text) {
  conn.dataset.state = state;
  connText.textContent = text;
}

function showBanner(kind, text) {
  banner.dataset.kind = kind;
  banner.textContent = text;
  banner.hidden = false;
}

function hideBanner() {
  banner.hidden = true;
  banner.textContent = "";
}
