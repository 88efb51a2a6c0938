// The job list: one card per record, rendered from its latest snapshot, and the card's audio.
// What a person typed is only ever set as textContent or an attribute value, never parsed as HTML.

import { urls } from "./api.js";
import {
  downloadName, excerpt, formatBytes, formatClock, formatSeconds, localDate, looksChinese, nf, nowS,
  voiceLabel,
} from "./format.js";
import { pcmToWav } from "./player.js";
import { createdAt, isActive, records, sortedRecords, stateOf } from "./store.js";

const $ = (id) => document.getElementById(id);
const list = $("job-list");
const empty = $("empty");
const jobCount = $("job-count");
const clearDone = $("clear-done");
const template = $("job-template");

const cards = new Map(); // job id -> <li>
const blobUrls = new Map(); // job id -> object URL (raw PCM wrapped as WAV)

const BADGES = {
  queued: "Queued", running: "Running", succeeded: "Ready", failed: "Failed",
  cancelled: "Cancelled", dead: "Failed", expired: "Expired",
};

/** The card's <article> (focusable), if the job is in the list. */
export const cardArticle = (id) => cards.get(id)?.querySelector("article") || null;

/** Put the cards in order (newest first), adding and removing as the records changed. */
export function renderList() {
  const ordered = sortedRecords();
  let index = 0;
  for (const rec of ordered) {
    const li = ensureCard(rec);
    const at = list.children[index];
    if (at !== li) list.insertBefore(li, at || null);
    index += 1;
  }
  for (const [id, li] of cards) {
    if (!records.has(id)) {
      li.remove();
      cards.delete(id);
    }
  }
  empty.hidden = ordered.length > 0;
  jobCount.textContent = ordered.length ? String(ordered.length) : "";
  clearDone.hidden = !ordered.some((r) => !isActive(r));
}

function ensureCard(rec) {
  let li = cards.get(rec.id);
  if (li) return li;
  li = template.content.firstElementChild.cloneNode(true);
  li.dataset.jobId = rec.id;
  const article = li.querySelector("article");
  article.tabIndex = -1;
  article.setAttribute("aria-label", `Job: ${excerpt(rec.text, 60)}`);
  const text = li.querySelector("[data-role=text]");
  text.textContent = rec.partial ? `${rec.text}…` : rec.text; // the list's start of a long text
  text.lang = looksChinese(rec.text) ? "zh" : "en";
  const audio = li.querySelector("[data-role=audio]");
  audio.addEventListener("error", () => {
    if (!audio.getAttribute("src")) return;
    rec.actionError = "The audio could not be loaded; it may have expired on the server.";
    renderJob(rec);
  });
  cards.set(rec.id, li);
  renderJob(rec);
  return li;
}

export function renderJob(rec) {
  const li = cards.get(rec.id);
  if (!li) return;
  const q = (sel) => li.querySelector(sel);
  const s = rec.snap || {};
  const state = stateOf(rec);
  const active = isActive(rec);
  li.dataset.state = state;

  q("[data-role=badge]").textContent = s.cancel_requested && active ? "Cancelling" : BADGES[state] || state;
  const speed = Number(rec.params.speed || 1);
  q("[data-role=meta]").textContent = [
    voiceLabel(rec.params.voice), (rec.params.format || "wav").toUpperCase(),
    speed !== 1 ? `${speed.toFixed(2).replace(/0$/, "")}×` : null,
  ].filter(Boolean).join(" · ");
  renderTime(rec, li);

  // Progress
  const total = s.segments_total || 0;
  const done = s.segments_done || 0;
  const progressWrap = q("[data-role=progress-wrap]");
  const progress = q("[data-role=progress]");
  progressWrap.hidden = !(state === "running");
  if (state === "running") {
    if (total) {
      progress.max = total;
      progress.value = done;
    } else {
      progress.removeAttribute("value"); // indeterminate
    }
    progress.setAttribute("aria-label", total ? `Segment ${done} of ${total}` : "Starting");
  }

  // Status line
  const status = q("[data-role=status]");
  const line = statusLine(rec, state, s);
  status.textContent = line;
  status.dataset.kind = state === "failed" || state === "dead" ? "error" : "info";
  status.hidden = !line;
  const actionError = q("[data-role=action-error]");
  actionError.textContent = rec.actionError || "";
  actionError.hidden = !rec.actionError;

  // Audio player
  const audio = q("[data-role=audio]");
  if (state === "succeeded") {
    if (!audio.getAttribute("src") && !audio.dataset.loading) {
      audio.preload = rec.fresh ? "metadata" : "none";
      if (rec.params.format === "pcm") loadPcm(rec, audio);
      else audio.src = urls.audio(rec.id);
    }
    audio.setAttribute("aria-label", `Audio: ${excerpt(rec.text, 40)}`);
  }

  // Actions
  const download = q("[data-role=download]");
  download.hidden = state !== "succeeded";
  if (state === "succeeded") {
    download.href = urls.download(rec.id);
    download.setAttribute("download", downloadName(rec));
  }
  const subtitles = q("[data-role=subtitles]");
  subtitles.hidden = state !== "succeeded";
  if (state === "succeeded") {
    subtitles.href = urls.subtitles(rec.id);
    subtitles.setAttribute("download", downloadName(rec).replace(/\.[a-z0-9]+$/, ".srt"));
  }
  const cancel = q("[data-action=cancel]");
  cancel.hidden = !active;
  const cancelling = Boolean(s.cancel_requested || rec.cancelPending);
  cancel.setAttribute("aria-disabled", cancelling ? "true" : "false");
  cancel.textContent = cancelling ? "Cancelling…" : "Cancel";
  // A job known from the server's list with its text's start only cannot be sent again.
  q("[data-action=retry]").hidden = rec.partial || !["failed", "dead", "cancelled", "expired"].includes(state);
  q("[data-action=curl]").hidden = Boolean(rec.partial);
  q("[data-action=remove]").hidden = active;

  paintLive(rec, li);
  renderDetails(rec, li);

  // A focused button that just disappeared would drop focus to <body>: keep it in the card.
  const focused = document.activeElement;
  if (focused && li.contains(focused) && focused.closest("[hidden]")) li.querySelector("article").focus();
}

function statusLine(rec, state, s) {
  const total = s.segments_total || 0;
  const done = s.segments_done || 0;
  if (state === "queued") {
    if (s.cancel_requested || rec.cancelPending) return "Cancelling…";
    if (s.attempts > 0) return `Back in the queue after attempt ${s.attempts}`;
    if (Number.isFinite(rec.position)) {
      return rec.position === 0 ? "Next in line"
        : `${nf.format(rec.position)} ${rec.position === 1 ? "job" : "jobs"} ahead in the queue`;
    }
    return "Waiting for a worker";
  }
  if (state === "running") {
    let line;
    if (s.cancel_requested || rec.cancelPending) line = "Cancelling…";
    else if (total && done >= total) line = `All ${total} segments done · finishing the file`;
    else if (total) line = `Segment ${done + 1} of ${total}${done ? ` · ${done} done` : ""}`;
    else line = "Starting…";
    return s.attempts > 1 ? `${line} · attempt ${s.attempts}` : line;
  }
  if (state === "succeeded") {
    return [s.duration_s ? `${formatSeconds(s.duration_s)} of audio` : null,
      s.audio_size ? formatBytes(s.audio_size) : null, heardLine(s.checks)].filter(Boolean).join(" · ");
  }
  if (state === "failed" || state === "dead") {
    const reason = s.error ? String(s.error).split("\n")[0].slice(0, 300) : "no reason given";
    return state === "dead"
      ? `Failed after ${s.attempts || "several"} attempts: ${reason}`
      : `Failed: ${reason}`;
  }
  if (state === "cancelled") return "Cancelled.";
  if (state === "expired") return "This job is no longer on the server (results are kept for a limited time).";
  return "";
}

// What the worker heard in the job's segments (docs/checks.md): the card says what was made
// again or failed; its details say it all, segments no recognizer heard too.
function heardLine(checks) {
  if (!checks) return null;
  const parts = [];
  if (checks.remade) parts.push(`${checks.remade} made again`);
  if (checks.failed) parts.push(`${checks.failed} failed every check`);
  return parts.length ? `Segments: ${parts.join(", ")}` : null;
}

function heardFact(checks) {
  if (!checks) return null;
  const heard = checks.passed + checks.failed + checks.unheard;
  return ["Checked", `${checks.passed} of ${heard} segments passed` +
    (checks.remade ? `, ${checks.remade} made again` : "") +
    (checks.failed ? `, ${checks.failed} failed` : "") +
    (checks.unheard ? `, ${checks.unheard} not heard by a recognizer` : "")];
}

function renderTime(rec, li) {
  const time = li.querySelector("[data-role=time]");
  const s = rec.snap || {};
  const created = createdAt(rec);
  let label;
  if (isActive(rec)) {
    label = formatSeconds(nowS() - created);
  } else if (s.finished_at && Number.isFinite(s.finished_at)) {
    const took = s.finished_at - created;
    label = `took ${took < 1 ? `${Math.max(0.01, took).toFixed(2)} s` : formatSeconds(took)}`;
  } else {
    label = formatClock(created);
  }
  if (time.textContent !== label) time.textContent = label;
  const iso = localDate(created).toISOString();
  if (time.dateTime !== iso) {
    time.dateTime = iso;
    time.title = `Submitted at ${formatClock(created)}`;
  }
}


function renderDetails(rec, li) {
  const details = li.querySelector("details");
  if (!details.open && details.dataset.rendered) return; // rendered when opened
  details.dataset.rendered = "1";
  const s = rec.snap || {};
  const facts = [
    ["Job ID", rec.id],
    ["Submitted", formatClock(createdAt(rec))],
    s.started_at ? ["Started", formatClock(s.started_at)] : null,
    s.finished_at ? ["Finished", formatClock(s.finished_at)] : null,
    s.attempts ? ["Attempts", String(s.attempts)] : null,
    s.duration_s ? ["Audio", `${formatSeconds(s.duration_s)}${s.audio_size ? `, ${formatBytes(s.audio_size)}` : ""}`] : null,
    rec.params.seed !== undefined ? ["Seed", String(rec.params.seed)] : null,
    heardFact(s.checks),
  ].filter(Boolean);
  const dl = li.querySelector("[data-role=facts]");
  const fragment = document.createDocumentFragment();
  for (const [k, v] of facts) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    fragment.append(dt, dd);
  }
  dl.replaceChildren(fragment);
  const ol = li.querySelector("[data-role=timeline]");
  const items = document.createDocumentFragment();
  const t0 = createdAt(rec);
  for (const t of rec.timeline) {
    const item = document.createElement("li");
    item.dataset.type = t.type;
    const name = t.seg ? `segment ${t.seg[0]} of ${t.seg[1]}` : t.type;
    item.textContent = `${name} · +${(Math.max(0, t.ts - t0)).toFixed(2)} s`;
    items.append(item);
  }
  ol.replaceChildren(items);
  ol.setAttribute("aria-label", "Events");
}

/** The "playing as it arrives" row, from rec.liveStatus (set by the live player). */
export function renderLive(rec) {
  const li = cards.get(rec.id);
  if (li) paintLive(rec, li);
}

/** The stream plays (or waits for its next part): its row is the card's player. (Waiting for
 * a tap it plays nothing yet: the finished file's player is shown beside its offer.) */
function livePlaying(rec) {
  return ["playing", "buffering"].includes(rec.liveStatus || "idle");
}

function paintLive(rec, li) {
  const row = li.querySelector("[data-role=live]");
  const status = rec.liveStatus || "idle";
  const state = stateOf(rec);
  // Waiting is worth showing once the job runs (with a way to stop); playing always.
  const show = livePlaying(rec) || status === "blocked" || (status === "waiting" && state === "running");
  row.hidden = !show;
  // The final file's player appears once the stream's is done, never beside it.
  li.querySelector("[data-role=audio]").hidden = state !== "succeeded" || livePlaying(rec);
  row.dataset.status = status;
  const labels = {
    playing: state === "running" ? "Playing as it arrives" : "Playing",
    buffering: "Buffering — the next part is on its way",
    blocked: "Ready to play — this browser waits for a tap",
  };
  li.querySelector("[data-role=live-text]").textContent =
    labels[status] || "Will play as soon as the first part is ready";
  li.querySelector("[data-action=play-live]").hidden = status !== "blocked";
}

async function loadPcm(rec, audio) {
  audio.dataset.loading = "1";
  try {
    const response = await fetch(urls.audio(rec.id), { credentials: "same-origin" });
    if (!response.ok) throw new Error(String(response.status));
    const url = URL.createObjectURL(pcmToWav(await response.arrayBuffer(), rec.snap?.sample_rate || 24000));
    blobUrls.set(rec.id, url);
    audio.src = url;
  } catch {
    rec.actionError = "The audio could not be loaded; it may have expired on the server.";
    renderJob(rec);
  } finally {
    delete audio.dataset.loading;
  }
}

/** Play the job's final file in its card, from `at` seconds. */
export function playFinal(rec, at = 0) {
  const li = cards.get(rec.id);
  if (!li) return;
  const audio = li.querySelector("[data-role=audio]");
  renderJob(rec);
  const start = () => {
    if (at > 0 && Number.isFinite(audio.duration) && at < audio.duration) audio.currentTime = at;
    audio.play().catch(() => { /* autoplay refused: the controls are there */ });
  };
  audio.preload = "auto";
  if (audio.readyState >= 1) {
    start();
  } else {
    audio.addEventListener("loadedmetadata", start, { once: true });
    if (audio.getAttribute("src")) audio.load(); // else the PCM blob is on its way
  }
}

/** Free what the card's audio holds (a PCM blob) once its record is gone. */
export function releaseAudio(id) {
  const blob = blobUrls.get(id);
  if (blob) URL.revokeObjectURL(blob);
  blobUrls.delete(id);
}

/** Start the active jobs' running clocks; render a card's details when they are opened. */
export function initJobList() {
  setInterval(() => {
    for (const rec of records.values()) {
      if (isActive(rec)) {
        const li = cards.get(rec.id);
        if (li) renderTime(rec, li);
      }
    }
  }, 250);
  document.addEventListener("toggle", (event) => {
    const details = event.target;
    if (details.matches?.(".job-details") && details.open) {
      const li = details.closest("li[data-job-id]");
      const rec = li && records.get(li.dataset.jobId);
      if (rec) renderDetails(rec, li);
    }
  }, true);
}
