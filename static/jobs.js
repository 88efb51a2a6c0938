// What a person can do to the jobs of the list: submit one, cancel, retry, remove, clear the
// finished ones, stop live playback, and copy a curl command that reproduces a job.

import { api, ApiError, curlCommand, urls } from "./api.js";
import { adoptServerClock, excerpt } from "./format.js";
import { cardArticle, releaseAudio, renderJob, renderList } from "./job-card.js";
import { applySnapshot, feedIsOpen, player, refreshJob, replayOrphans } from "./live.js";
import { canStreamChunks } from "./player.js";
import { announce } from "./notices.js";
import { forgetIds, isActive, records, saveNow, scheduleSave, sortedRecords } from "./store.js";

const $ = (id) => document.getElementById(id);
const dialog = $("curl-dialog");
const curlText = $("curl-text");
const curlCopy = $("curl-copy");

/** POST a job, add it to the list, start live playback. Throws ApiError. */
export async function submitJob(params, { autoplay, document = false }) {
  // Heard as it is made: PCM chunks streamed where the browser can read a fetch body as a stream,
  // else its segments as they finish (a document's always: it is made in parts, not streamed).
  const streamed = autoplay && !document && player.ctx && canStreamChunks();
  if (streamed) params = { ...params, stream: true };
  const res = await api.submit(params);
  const snap = res.job && typeof res.job === "object" ? res.job : { id: res.id, state: res.state };
  const id = res.id || snap.id;
  adoptServerClock(snap.created_at); // elapsed times are computed on the server's clock
  const { text, ...rest } = params;
  if (!rest.voice && typeof snap.voice === "string") rest.voice = snap.voice; // the server's pick
  const rec = {
    id, text, params: rest, snap: null, position: res.position ?? null, timeline: [],
    submittedAt: Date.now() / 1000, expired: false, fresh: true, autoplay,
    cancelPending: false, actionError: null,
  };
  records.set(id, rec);
  applySnapshot(rec, { ...snap, id });
  if (streamed) {
    player.startStream(id, { url: urls.stream(id) });
  } else if (autoplay) {
    player.start(id, { format: rest.format, sampleRate: snap.sample_rate || 24000, urlFor: (k) => urls.segment(id, k) });
  }
  if (player.has(id)) rec.liveStatus = "waiting";
  renderList();
  replayOrphans(rec);
  scheduleSave();
  announce(`Job queued: ${excerpt(text, 40)}`);
  return rec;
}

async function cancelJob(rec, button) {
  if (rec.cancelPending || rec.snap?.cancel_requested) return;
  rec.cancelPending = true;
  rec.actionError = null;
  player.stop(rec.id);
  renderJob(rec);
  try {
    const res = await api.cancel(rec.id);
    announce(res.state === "cancelled" ? "Job cancelled." : "Cancelling the job…");
    if (!feedIsOpen() || res.state === "cancelled") refreshJob(rec);
  } catch (err) {
    rec.cancelPending = false;
    if (err.status === 409) {
      refreshJob(rec); // it ended meanwhile: show how
      return;
    }
    if (err.kind === "not_found") rec.expired = true;
    else rec.actionError = `Could not cancel: ${err.message}`;
    announce(rec.actionError || "This job is no longer on the server.");
    renderJob(rec);
  }
  if (button.isConnected && !button.hidden) button.focus();
}

async function retryJob(rec, { autoplay }) {
  rec.actionError = null;
  player.unlock();
  try {
    await submitJob({ text: rec.text, ...rec.params }, { autoplay });
  } catch (err) {
    const e = err instanceof ApiError ? err : null;
    rec.actionError = e
      ? `Retry failed: ${e.message}${e.retryAfter ? ` Try again in ${e.retryAfter} s.` : ""}`
      : "Retry failed. Please try again.";
    announce(rec.actionError);
    renderJob(rec);
  }
}

function forgetRecord(rec) {
  forgetIds([rec.id]);
  records.delete(rec.id);
  player.forget(rec.id);
  releaseAudio(rec.id);
}

function removeJob(rec) {
  const ordered = sortedRecords();
  const index = ordered.indexOf(rec);
  forgetRecord(rec);
  renderList();
  saveNow();
  const next = ordered[index + 1] || ordered[index - 1];
  const target = next && next !== rec ? cardArticle(next.id) : $("jobs-title");
  if (target) {
    if (!target.hasAttribute("tabindex")) target.tabIndex = -1;
    target.focus();
  }
  announce("Removed from the list.");
}

async function copyText(text) {
  try {
    if (!navigator.clipboard || !window.isSecureContext) return false;
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** To the clipboard if the browser allows, else in a dialog to copy by hand. */
async function copyCurl(rec, button) {
  const command = curlCommand(window.location.origin, { text: rec.text, ...rec.params });
  if (await copyText(command)) {
    flashLabel(button, "Copied ✓");
    announce("curl command copied to the clipboard.");
    return;
  }
  curlText.value = command;
  dialog.showModal();
  curlText.focus();
  curlText.select();
}

function flashLabel(button, label) {
  const original = button.dataset.label || button.textContent;
  button.dataset.label = original;
  button.textContent = label;
  clearTimeout(button.flashTimer);
  button.flashTimer = setTimeout(() => {
    button.textContent = original;
  }, 2000);
}

/**
 * The list's buttons (one listener for all cards), "Clear finished" and the curl dialog.
 * autoplay(): whether a retried job plays as it generates; afterClear(): where focus goes next.
 */
export function initJobActions({ autoplay, afterClear }) {
  $("job-list").addEventListener("click", (event) => {
    const button = event.target.closest("[data-action]");
    if (!button) return;
    const li = button.closest("li[data-job-id]");
    const rec = li && records.get(li.dataset.jobId);
    if (!rec) return;
    const action = button.dataset.action;
    if (action === "cancel") cancelJob(rec, button);
    else if (action === "retry") retryJob(rec, { autoplay: autoplay() });
    else if (action === "curl") copyCurl(rec, button);
    else if (action === "remove") removeJob(rec);
    else if (action === "play-live") player.resume(); // a gesture: autoplay was refused
    else if (action === "stop-live") {
      player.stop(rec.id);
      li.querySelector("article").focus();
    }
  });
  $("clear-done").addEventListener("click", () => {
    for (const rec of [...records.values()]) if (!isActive(rec)) forgetRecord(rec);
    renderList();
    saveNow();
    afterClear();
    announce("Finished jobs removed from the list.");
  });
  curlCopy.addEventListener("click", async () => {
    curlText.select();
    let ok = await copyText(curlText.value);
    if (!ok) {
      try {
        ok = document.execCommand("copy");
      } catch {
        ok = false;
      }
    }
    flashLabel(curlCopy, ok ? "Copied ✓" : "Press Ctrl+C");
  });
}
