// The demo page: composer, live job list, playback. Everything a person typed is rendered with
// textContent or set as an attribute value, never parsed as HTML.

import { api, ApiError, curlCommand, EventFeed, TERMINAL, urls } from "./api.js";
import { LivePlayer, pcmToWav } from "./player.js";

const STORE_JOBS = "chattts.v1.jobs";
const STORE_CURSOR = "chattts.v1.cursor";
const STORE_PREFS = "chattts.v1.prefs";
const MAX_RECORDS = 100;
const MAX_TIMELINE = 80;
const FRESH_S = 15; // an event younger than this is "live", not history replayed on load
const POLL_MS = 2500;

const $ = (id) => document.getElementById(id);
const root = $("app");
const els = {
  form: $("tts-form"), text: $("text"), count: $("char-count"), textMsg: $("text-msg"),
  voice: $("voice"), voiceHint: $("voice-hint"), preview: $("preview"), format: $("format"),
  speed: $("speed"), speedOut: $("speed-out"), seed: $("seed"), temperature: $("temperature"),
  topP: $("top_p"), topK: $("top_k"), refine: $("refine"), livePlay: $("live-play"),
  submit: $("submit"), submitKbd: $("submit-kbd"), submitHint: $("submit-hint"),
  formError: $("form-error"), formErrorTitle: $("form-error-title"),
  formErrorBody: $("form-error-body"), formErrorRetry: $("form-error-retry"),
  list: $("job-list"), empty: $("empty"), jobCount: $("job-count"), clearDone: $("clear-done"),
  conn: $("conn"), connText: $("conn-text"), banner: $("conn-banner"),
  announcer: $("announcer"), previewAudio: $("preview-audio"),
  dialog: $("curl-dialog"), curlText: $("curl-text"), curlCopy: $("curl-copy"),
  template: $("job-template"),
};

const config = {
  maxChars: Number(root.dataset.maxChars) || 4000,
  defaultVoice: root.dataset.defaultVoice || "",
};

const records = new Map(); // job id -> record (what we show and keep in localStorage)
const cards = new Map(); // job id -> <li>
const orphans = new Map(); // events of jobs not (yet) in the list: id -> [[type, data, id]]
const previews = new Map(); // preview job id -> { voice, resolve }
const previewCache = new Map(); // voice -> audio URL
const blobUrls = new Map(); // job id -> object URL (raw PCM wrapped as WAV)
const waiters = new Map(); // job id -> [resolve] (until terminal)
let skewS = 0; // server clock minus ours, only when clearly off
let feed = null;
let submitting = false;
let connAnnouncedDown = false;

const player = new LivePlayer({ onChange: (id, status) => onLiveChange(id, status) });

// ---------------------------------------------------------------------------------------------
// Small helpers

const nf = new Intl.NumberFormat();
const isMac = /Mac|iPhone|iPad|iPod/.test(navigator.userAgentData?.platform || navigator.platform || "");
const countChars = (text) => [...text.replace(/\p{Cf}/gu, "")].length;
const nowS = () => Date.now() / 1000 + skewS;
const looksChinese = (text) => /[\u3400-\u9fff\uf900-\ufaff]/.test(text);

function formatSeconds(s) {
  if (!Number.isFinite(s) || s < 0) s = 0;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.floor(s)} s`;
  const m = Math.floor(s / 60);
  const r = Math.floor(s % 60);
  if (m < 60) return `${m} min ${String(r).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

function formatBytes(n) {
  if (!Number.isFinite(n)) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function formatClock(epochS) {
  if (!Number.isFinite(epochS)) return "";
  return new Date((epochS - skewS) * 1000).toLocaleTimeString([], {
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

function excerpt(text, n = 48) {
  const chars = [...text.replace(/\s+/g, " ").trim()];
  return chars.length > n ? `${chars.slice(0, n - 1).join("")}…` : chars.join("");
}

function downloadName(rec) {
  const slug = [...(rec.text || "").normalize("NFKC").replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "")].slice(0, 32).join("").replace(/-+$/, "") || "speech";
  const ext = rec.params.format || "wav";
  return `${slug}-${rec.params.voice}-${rec.id.slice(0, 8)}.${ext}`;
}

let announceTimer = null;
const announceQueue = [];
function announce(message) {
  announceQueue.push(message);
  if (announceTimer) return;
  const flush = () => {
    if (!announceQueue.length) {
      announceTimer = null;
      return;
    }
    els.announcer.textContent = announceQueue.splice(0).join(" ");
    announceTimer = setTimeout(flush, 700);
  };
  els.announcer.textContent = "";
  announceTimer = setTimeout(flush, 60);
}

// ---------------------------------------------------------------------------------------------
// Storage

function readStore(key, fallback) {
  try {
    const raw = localStorage.getItem(key);
    return raw ? JSON.parse(raw) : fallback;
  } catch {
    return fallback;
  }
}

function writeStore(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    /* private mode or full: the page still works, only without history */
  }
}

let saveTimer = null;
function scheduleSave() {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(saveNow, 250);
}

function saveNow() {
  clearTimeout(saveTimer);
  const list = sortedRecords().slice(0, MAX_RECORDS).map((r) => ({
    id: r.id, text: r.text, params: r.params, snap: r.snap, position: r.position,
    timeline: r.timeline, submittedAt: r.submittedAt, expired: r.expired || undefined,
  }));
  writeStore(STORE_JOBS, list);
  if (feed && feed.cursor) writeStore(STORE_CURSOR, feed.cursor);
}

function loadRecord(raw) {
  if (!raw || typeof raw.id !== "string" || typeof raw.text !== "string" || !raw.params) return null;
  return {
    id: raw.id, text: raw.text, params: raw.params, snap: raw.snap || null,
    position: raw.position ?? null, timeline: Array.isArray(raw.timeline) ? raw.timeline : [],
    submittedAt: raw.submittedAt || Date.now() / 1000, expired: Boolean(raw.expired),
    fresh: false, autoplay: false, cancelPending: false, actionError: null,
  };
}

function sortedRecords() {
  return [...records.values()].sort((a, b) => createdAt(b) - createdAt(a));
}

const createdAt = (rec) => rec.snap?.created_at ?? rec.submittedAt;
const stateOf = (rec) => (rec.expired ? "expired" : rec.snap?.state || "queued");
const isActive = (rec) => !rec.expired && !TERMINAL.has(stateOf(rec));

// ---------------------------------------------------------------------------------------------
// Composer

function readParams() {
  const params = {
    text: els.text.value,
    voice: els.voice.value,
    format: els.format.value,
    speed: Number(els.speed.value),
  };
  const num = (el, parse) => (el.value.trim() === "" ? undefined : parse(el.value));
  const extra = {
    seed: num(els.seed, (v) => Number.parseInt(v, 10)),
    temperature: num(els.temperature, Number),
    top_p: num(els.topP, Number),
    top_k: num(els.topK, (v) => Number.parseInt(v, 10)),
  };
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) params[k] = v;
  if (els.refine.checked) params.refine = true;
  return params;
}

function updateCount() {
  const n = countChars(els.text.value);
  const max = config.maxChars;
  els.count.textContent = `${nf.format(n)} / ${nf.format(max)}`;
  const level = n > max ? "over" : n >= max * 0.9 ? "warn" : "ok";
  if (els.count.dataset.level !== level && level === "over") {
    announce(`Text too long: the limit is ${nf.format(max)} characters.`);
  }
  els.count.dataset.level = level;
  if (n > max) {
    setFieldMessage(`Too long by ${nf.format(n - max)} characters — the limit is ${nf.format(max)}. `
      + "Shorten the text or split it into several jobs.");
  } else if (els.textMsg.dataset.kind === "length" || els.textMsg.dataset.kind === "empty") {
    setFieldMessage(null);
  }
  updateVoiceHint();
}

function setFieldMessage(message, kind = "length") {
  if (message) {
    els.textMsg.textContent = message;
    els.textMsg.dataset.kind = kind;
    els.textMsg.hidden = false;
    els.text.setAttribute("aria-invalid", "true");
  } else {
    els.textMsg.textContent = "";
    delete els.textMsg.dataset.kind;
    els.textMsg.hidden = true;
    els.text.removeAttribute("aria-invalid");
  }
}

function voiceLanguage(name) {
  const option = [...els.voice.options].find((o) => o.value === name);
  return option?.dataset.language || "";
}

function voiceLabel(name) {
  const option = [...els.voice.options].find((o) => o.value === name);
  return option ? option.textContent : name;
}

function syncPreviewLabel() {
  const playing = !els.previewAudio.paused;
  const voice = voiceLabel(els.voice.value);
  els.preview.setAttribute("aria-label", `${playing ? "Stop the preview of" : "Preview"} the voice ${voice}`);
}

function updateVoiceHint() {
  const text = els.text.value;
  const lang = voiceLanguage(els.voice.value);
  let hint = "";
  if (text.trim().length >= 4 && lang) {
    const chinese = looksChinese(text);
    const latin = (text.match(/[A-Za-z]/g) || []).length;
    if (chinese && lang.startsWith("en")) {
      hint = "Your text contains Chinese; a Mandarin voice will pronounce it better.";
    } else if (!chinese && latin >= 4 && lang.startsWith("zh")) {
      hint = "Your text looks English; an English voice will pronounce it better.";
    }
  }
  els.voiceHint.textContent = hint;
  els.voiceHint.hidden = !hint;
}

function updateSpeed() {
  const v = Number(els.speed.value);
  els.speedOut.textContent = `${v.toFixed(2)}×`;
  els.speed.setAttribute("aria-valuetext", `${v.toFixed(2)} times normal speed`);
}

function savePrefs() {
  writeStore(STORE_PREFS, {
    voice: els.voice.value, format: els.format.value, speed: els.speed.value,
    livePlay: els.livePlay.checked,
  });
}

function restorePrefs() {
  const prefs = readStore(STORE_PREFS, {});
  const has = (select, value) => [...select.options].some((o) => o.value === value);
  if (prefs.voice && has(els.voice, prefs.voice)) els.voice.value = prefs.voice;
  if (prefs.format && has(els.format, prefs.format)) els.format.value = prefs.format;
  if (prefs.speed && Number(prefs.speed) >= 0.5 && Number(prefs.speed) <= 2) els.speed.value = prefs.speed;
  if (typeof prefs.livePlay === "boolean") els.livePlay.checked = prefs.livePlay;
}

/** Rebuild the voice list from /v1/voices when it differs from what the server rendered. */
async function refreshVoices() {
  let body;
  try {
    body = await api.voices();
  } catch {
    return; // the server-rendered list stays
  }
  const voices = Array.isArray(body?.voices) ? body.voices.filter((v) => v && typeof v.name === "string") : [];
  if (!voices.length) return;
  const current = [...els.voice.options].map((o) => o.value).sort().join("\n");
  if (voices.map((v) => v.name).sort().join("\n") === current) return;
  const selected = els.voice.value;
  const names = { "zh-CN": "Mandarin Chinese", "en-US": "English (US)", "en-GB": "English (UK)" };
  const groups = new Map();
  for (const v of voices) {
    const lang = typeof v.language === "string" ? v.language : "";
    if (!groups.has(lang)) groups.set(lang, []);
    groups.get(lang).push(v);
  }
  const fragment = document.createDocumentFragment();
  for (const [lang, list] of groups) {
    const group = document.createElement("optgroup");
    group.label = names[lang] || lang || "Other";
    for (const v of list) {
      const option = document.createElement("option");
      option.value = v.name;
      option.dataset.language = lang;
      option.textContent = typeof v.description === "string" && v.description ? v.description : v.name;
      group.append(option);
    }
    fragment.append(group);
  }
  els.voice.replaceChildren(fragment);
  const keep = voices.some((v) => v.name === selected) ? selected : config.defaultVoice;
  if (keep) els.voice.value = keep;
}

function showFormError(err) {
  clearInterval(showFormError.timer);
  if (!err) {
    els.formError.hidden = true;
    els.formErrorTitle.textContent = "";
    els.formErrorBody.textContent = "";
    els.formErrorRetry.textContent = "";
    return;
  }
  els.formErrorTitle.textContent = err.title || "Something went wrong";
  els.formErrorBody.textContent = err.message || "Please try again.";
  els.formError.dataset.kind = err.kind || "server";
  const waits = err.kind === "rate_limited" || err.kind === "unavailable";
  // The countdown is not a live region (a screen reader would hear it every second);
  // the end of the wait is announced once.
  const paint = (left) => {
    els.formErrorRetry.textContent = left > 0
      ? `You can try again in ${left} s.` : "You can try again now.";
  };
  if (waits && Number.isFinite(err.retryAfter) && err.retryAfter !== null) {
    const until = Date.now() + err.retryAfter * 1000;
    paint(err.retryAfter);
    showFormError.timer = setInterval(() => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      paint(left);
      if (left <= 0) {
        clearInterval(showFormError.timer);
        announce("You can try again now.");
      }
    }, 1000);
  } else {
    els.formErrorRetry.textContent = err.kind === "unavailable" ? "Please try again in a moment." : "";
  }
  els.formError.hidden = false;
}

const PARAM_FIELDS = {
  text: "text", voice: "voice", format: "format", speed: "speed", seed: "seed",
  temperature: "temperature", top_p: "topP", top_k: "topK", refine: "refine",
};

function focusParam(param) {
  const key = typeof param === "string" ? PARAM_FIELDS[param.replace(/^body\./, "")] : null;
  const el = key ? els[key] : null;
  if (!el) return;
  const details = el.closest("details");
  if (details) details.open = true;
  el.setAttribute("aria-invalid", "true");
  el.focus();
  el.addEventListener("input", () => el.removeAttribute("aria-invalid"), { once: true });
}

async function submitFromForm() {
  if (submitting) return;
  const params = readParams();
  const n = countChars(params.text.trim());
  if (!n) {
    setFieldMessage("Type some text first.", "empty");
    els.text.focus();
    return;
  }
  if (countChars(params.text) > config.maxChars) {
    updateCount();
    els.text.focus();
    return;
  }
  player.unlock(); // inside the click / key press: lets live playback start later
  submitting = true;
  els.submit.setAttribute("aria-busy", "true");
  els.submit.classList.add("is-busy");
  els.submit.querySelector(".btn-label").textContent = "Submitting…";
  try {
    await submitJob(params, { autoplay: els.livePlay.checked });
    showFormError(null);
  } catch (err) {
    const e = err instanceof ApiError ? err : new ApiError({ kind: "server", title: "Something went wrong", message: "Please try again." });
    showFormError(e);
    if (e.param) focusParam(e.param);
    if (e.kind === "too_large") els.text.focus();
  } finally {
    submitting = false;
    els.submit.removeAttribute("aria-busy");
    els.submit.classList.remove("is-busy");
    els.submit.querySelector(".btn-label").textContent = "Synthesize";
  }
}

/** POST a job, add it to the list, start live playback. Throws ApiError. */
async function submitJob(params, { autoplay }) {
  const res = await api.submit(params);
  const snap = res.job && typeof res.job === "object" ? res.job : { id: res.id, state: res.state };
  const id = res.id || snap.id;
  // Elapsed times are computed on the server's clock; adopt it only when ours is clearly off.
  if (Number.isFinite(snap.created_at)) {
    const off = snap.created_at - Date.now() / 1000;
    if (Math.abs(off) > 3) skewS = off;
  }
  const { text, ...rest } = params;
  const rec = {
    id, text, params: rest, snap: null, position: res.position ?? null, timeline: [],
    submittedAt: Date.now() / 1000, expired: false, fresh: true, autoplay,
    cancelPending: false, actionError: null,
  };
  records.set(id, rec);
  applySnapshot(rec, { ...snap, id });
  if (autoplay) {
    player.start(id, { format: rest.format, sampleRate: snap.sample_rate || 24000, urlFor: (k) => urls.segment(id, k) });
    if (player.has(id)) rec.liveStatus = "waiting";
  }
  renderList();
  replayOrphans(rec);
  scheduleSave();
  announce(`Job queued: ${excerpt(text, 40)}`);
  return rec;
}

// ---------------------------------------------------------------------------------------------
// Events and snapshots

function onFeedEvent(type, data, eventId) {
  const snap = data.job;
  if (!snap || typeof snap.id !== "string") return;
  const preview = previews.get(snap.id);
  if (preview) {
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

function replayOrphans(rec) {
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
  applySnapshot(rec, data.job, undefined, { announce: live });
  if (type === "progress" && entry.seg && player.has(rec.id)) {
    player.segment(rec.id, entry.seg[0], entry.seg[1]);
  }
}

function applySnapshot(rec, snap, position, { announce: speak = false } = {}) {
  if (position !== undefined) rec.position = position;
  const before = rec.snap;
  // Terminal states are absorbing: a late answer never takes a finished job back.
  if (before && TERMINAL.has(before.state) && !TERMINAL.has(snap.state)) {
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
    const poll = async () => {
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
      setTimeout(poll, 1500);
    };
    setTimeout(poll, 1500);
  });
}

/** Ask the server for jobs the stream may not tell us about: queue positions, a dead stream. */
async function poll() {
  const streamUp = feed && feed.state === "open";
  const targets = sortedRecords()
    .filter((r) => isActive(r) && (!streamUp || stateOf(r) === "queued"))
    .slice(0, 10);
  await Promise.all(targets.map(refreshJob));
}

async function refreshJob(rec) {
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
// Rendering

const BADGES = {
  queued: "Queued", running: "Running", succeeded: "Ready", failed: "Failed",
  cancelled: "Cancelled", dead: "Failed", expired: "Expired",
};

function renderList() {
  const ordered = sortedRecords();
  let index = 0;
  for (const rec of ordered) {
    const li = ensureCard(rec);
    const at = els.list.children[index];
    if (at !== li) els.list.insertBefore(li, at || null);
    index += 1;
  }
  for (const [id, li] of cards) {
    if (!records.has(id)) {
      li.remove();
      cards.delete(id);
    }
  }
  els.empty.hidden = ordered.length > 0;
  els.jobCount.textContent = ordered.length ? String(ordered.length) : "";
  els.clearDone.hidden = !ordered.some((r) => !isActive(r));
}

function ensureCard(rec) {
  let li = cards.get(rec.id);
  if (li) return li;
  li = els.template.content.firstElementChild.cloneNode(true);
  li.dataset.jobId = rec.id;
  const article = li.querySelector("article");
  article.tabIndex = -1;
  article.setAttribute("aria-label", `Job: ${excerpt(rec.text, 60)}`);
  const text = li.querySelector("[data-role=text]");
  text.textContent = rec.text;
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

function renderJob(rec) {
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
  let line = "";
  let kind = "info";
  if (state === "queued") {
    if (s.cancel_requested || rec.cancelPending) line = "Cancelling…";
    else if (s.attempts > 0) line = `Back in the queue after attempt ${s.attempts}`;
    else if (Number.isFinite(rec.position)) {
      line = rec.position === 0 ? "Next in line"
        : `${nf.format(rec.position)} ${rec.position === 1 ? "job" : "jobs"} ahead in the queue`;
    } else line = "Waiting for a worker";
  } else if (state === "running") {
    if (s.cancel_requested || rec.cancelPending) line = "Cancelling…";
    else if (total && done >= total) line = `All ${total} segments done · finishing the file`;
    else if (total) line = `Segment ${done + 1} of ${total}${done ? ` · ${done} done` : ""}`;
    else line = "Starting…";
    if (s.attempts > 1) line += ` · attempt ${s.attempts}`;
  } else if (state === "succeeded") {
    line = [s.duration_s ? `${formatSeconds(s.duration_s)} of audio` : null,
      s.audio_size ? formatBytes(s.audio_size) : null].filter(Boolean).join(" · ");
  } else if (state === "failed" || state === "dead") {
    kind = "error";
    const reason = s.error ? String(s.error).split("\n")[0].slice(0, 300) : "no reason given";
    line = state === "dead"
      ? `Failed after ${s.attempts || "several"} attempts: ${reason}`
      : `Failed: ${reason}`;
  } else if (state === "cancelled") {
    line = "Cancelled.";
  } else if (state === "expired") {
    line = "This job is no longer on the server (results are kept for a limited time).";
  }
  status.textContent = line;
  status.dataset.kind = kind;
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
    audio.hidden = false;
    audio.setAttribute("aria-label", `Audio: ${excerpt(rec.text, 40)}`);
  } else {
    audio.hidden = true;
  }

  // Actions
  const download = q("[data-role=download]");
  download.hidden = state !== "succeeded";
  if (state === "succeeded") {
    download.href = urls.download(rec.id);
    download.setAttribute("download", downloadName(rec));
  }
  const cancel = q("[data-action=cancel]");
  cancel.hidden = !active;
  const cancelling = Boolean(s.cancel_requested || rec.cancelPending);
  cancel.setAttribute("aria-disabled", cancelling ? "true" : "false");
  cancel.textContent = cancelling ? "Cancelling…" : "Cancel";
  q("[data-action=retry]").hidden = !["failed", "dead", "cancelled", "expired"].includes(state);
  q("[data-action=remove]").hidden = active;

  renderLive(rec, li);
  renderDetails(rec, li);

  // A focused button that just disappeared would drop focus to <body>: keep it in the card.
  const focused = document.activeElement;
  if (focused && li.contains(focused) && focused.closest("[hidden]")) li.querySelector("article").focus();
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
  const iso = new Date((created - skewS) * 1000).toISOString();
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

function renderLive(rec, li) {
  const row = li.querySelector("[data-role=live]");
  const status = rec.liveStatus || "idle";
  const state = stateOf(rec);
  // Waiting is worth showing once the job runs (with a way to stop); playing always.
  const show = status === "playing" || (status === "waiting" && state === "running");
  row.hidden = !show;
  row.dataset.status = status;
  let label = "Will play as soon as the first part is ready";
  if (status === "playing") label = state === "running" ? "Playing as it arrives" : "Playing";
  li.querySelector("[data-role=live-text]").textContent = label;
}

function onLiveChange(id, status) {
  const rec = records.get(id);
  if (!rec) return;
  rec.liveStatus = status;
  const li = cards.get(id);
  if (li) renderLive(rec, li);
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

function playFinal(rec, at = 0) {
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

// ---------------------------------------------------------------------------------------------
// Job actions

async function cancelJob(rec, button) {
  if (rec.cancelPending || rec.snap?.cancel_requested) return;
  rec.cancelPending = true;
  rec.actionError = null;
  player.stop(rec.id);
  renderJob(rec);
  try {
    const res = await api.cancel(rec.id);
    announce(res.state === "cancelled" ? "Job cancelled." : "Cancelling the job…");
    if (feed?.state !== "open" || res.state === "cancelled") refreshJob(rec);
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

async function retryJob(rec) {
  rec.actionError = null;
  player.unlock();
  try {
    await submitJob({ text: rec.text, ...rec.params }, { autoplay: els.livePlay.checked });
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
  records.delete(rec.id);
  player.forget(rec.id);
  const blob = blobUrls.get(rec.id);
  if (blob) URL.revokeObjectURL(blob);
  blobUrls.delete(rec.id);
}

function removeJob(rec) {
  const ordered = sortedRecords();
  const index = ordered.indexOf(rec);
  forgetRecord(rec);
  renderList();
  saveNow();
  const next = ordered[index + 1] || ordered[index - 1];
  const target = next && next !== rec ? cards.get(next.id)?.querySelector("article") : $("jobs-title");
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

async function copyCurl(rec, button) {
  const command = curlCommand(window.location.origin, { text: rec.text, ...rec.params });
  if (await copyText(command)) {
    flashLabel(button, "Copied ✓");
    announce("curl command copied to the clipboard.");
    return;
  }
  els.curlText.value = command;
  els.dialog.showModal();
  els.curlText.focus();
  els.curlText.select();
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

// ---------------------------------------------------------------------------------------------
// Voice preview

const PREVIEW_TEXT = {
  zh: "你好，很高兴认识你。这是我的声音。",
  en: "Hello! This is how I sound.",
};

async function previewVoice() {
  const audio = els.previewAudio;
  const label = els.preview.querySelector(".btn-label");
  if (!audio.paused) {
    audio.pause();
    return;
  }
  if (els.preview.getAttribute("aria-busy") === "true") return;
  const voice = els.voice.value;
  const play = (url) => {
    if (audio.getAttribute("src") !== url) audio.src = url;
    audio.currentTime = 0;
    audio.play().catch(() => {
      showFormError(new ApiError({ kind: "server", title: "Preview blocked", message: "Your browser did not allow the preview to play." }));
    });
  };
  if (previewCache.has(voice)) {
    play(previewCache.get(voice));
    return;
  }
  els.preview.setAttribute("aria-busy", "true");
  label.textContent = "Loading…";
  try {
    const lang = voiceLanguage(voice).startsWith("zh") ? "zh" : "en";
    const res = await api.submit({ text: PREVIEW_TEXT[lang], voice, format: "wav", speed: 1 });
    const id = res.id || res.job?.id;
    previews.set(id, { voice });
    const early = orphans.get(id);
    orphans.delete(id);
    const waiting = waitTerminal(id, 30000);
    if (early) for (const [, data] of early) settleWaiters(data.job);
    if (res.job && TERMINAL.has(res.job.state)) settleWaiters({ ...res.job, id });
    const snap = await waiting;
    if (snap.state !== "succeeded") {
      throw new ApiError({ kind: "server", title: "Preview failed", message: snap.error || `The preview job ended ${snap.state}.` });
    }
    const url = urls.audio(id);
    previewCache.set(voice, url);
    play(url);
  } catch (err) {
    showFormError(err instanceof ApiError ? err : new ApiError({ kind: "server", title: "Preview failed", message: "Please try again." }));
  } finally {
    els.preview.removeAttribute("aria-busy");
    label.textContent = "Preview";
  }
}

function syncPreviewButton() {
  const playing = !els.previewAudio.paused;
  els.preview.querySelector(".btn-label").textContent = playing ? "Stop" : "Preview";
  els.preview.classList.toggle("is-playing", playing);
  syncPreviewLabel();
}

// ---------------------------------------------------------------------------------------------
// Live connection status

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
  els.conn.dataset.state = state;
  els.connText.textContent = text;
}

function showBanner(kind, text) {
  els.banner.dataset.kind = kind;
  els.banner.textContent = text;
  els.banner.hidden = false;
}

function hideBanner() {
  els.banner.hidden = true;
  els.banner.textContent = "";
}

// ---------------------------------------------------------------------------------------------
// Wiring

function onListClick(event) {
  const button = event.target.closest("[data-action]");
  if (!button) return;
  const li = button.closest("li[data-job-id]");
  const rec = li && records.get(li.dataset.jobId);
  if (!rec) return;
  const action = button.dataset.action;
  if (action === "cancel") cancelJob(rec, button);
  else if (action === "retry") retryJob(rec);
  else if (action === "curl") copyCurl(rec, button);
  else if (action === "remove") removeJob(rec);
  else if (action === "stop-live") {
    player.stop(rec.id);
    li.querySelector("article").focus();
  }
}

function mergeFromStorage() {
  const stored = readStore(STORE_JOBS, []);
  if (!Array.isArray(stored)) return;
  let changed = false;
  for (const raw of stored) {
    const incoming = loadRecord(raw);
    if (!incoming) continue;
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

function init() {
  if (isMac) {
    els.submitKbd.textContent = "⌘ ↵";
    els.submitHint.textContent = "Press Command and Enter to synthesize.";
  }
  restorePrefs();
  updateSpeed();
  updateCount();

  const stored = readStore(STORE_JOBS, []);
  for (const raw of Array.isArray(stored) ? stored : []) {
    const rec = loadRecord(raw);
    if (rec) records.set(rec.id, rec);
  }
  renderList();

  els.text.addEventListener("input", updateCount);
  els.voice.addEventListener("change", () => {
    updateVoiceHint();
    syncPreviewLabel();
    savePrefs();
    if (!els.previewAudio.paused) els.previewAudio.pause();
  });
  els.format.addEventListener("change", savePrefs);
  els.livePlay.addEventListener("change", savePrefs);
  els.speed.addEventListener("input", updateSpeed);
  els.speed.addEventListener("change", savePrefs);
  els.form.addEventListener("submit", (event) => {
    event.preventDefault();
    submitFromForm();
  });
  els.form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.isComposing) {
      event.preventDefault();
      submitFromForm();
    }
  });
  els.preview.addEventListener("click", previewVoice);
  els.previewAudio.addEventListener("play", syncPreviewButton);
  els.previewAudio.addEventListener("pause", syncPreviewButton);
  els.previewAudio.addEventListener("ended", syncPreviewButton);
  els.list.addEventListener("click", onListClick);
  els.clearDone.addEventListener("click", () => {
    for (const rec of [...records.values()]) if (!isActive(rec)) forgetRecord(rec);
    renderList();
    saveNow();
    els.text.focus();
    announce("Finished jobs removed from the list.");
  });
  els.curlCopy.addEventListener("click", async () => {
    els.curlText.select();
    let ok = await copyText(els.curlText.value);
    if (!ok) {
      try {
        ok = document.execCommand("copy");
      } catch {
        ok = false;
      }
    }
    flashLabel(els.curlCopy, ok ? "Copied ✓" : "Press Ctrl+C");
  });
  // One sound at a time: playing anything stops the rest.
  document.addEventListener("play", (event) => {
    for (const a of document.querySelectorAll("audio")) if (a !== event.target) a.pause();
    player.stopAll();
  }, true);
  window.addEventListener("storage", (event) => {
    if (event.key === STORE_JOBS) mergeFromStorage();
  });
  window.addEventListener("pagehide", saveNow);

  const storedCursor = readStore(STORE_CURSOR, null);
  // No cursor yet: replay the last two minutes, enough to cover a job submitted in another tab.
  const cursor = typeof storedCursor === "string" && /^\d+(-\d+)?$/.test(storedCursor)
    ? storedCursor : `${Date.now() - 120000}-0`;
  feed = new EventFeed({
    cursor,
    onEvent: (type, data, id) => {
      onFeedEvent(type, data, id);
      scheduleSave();
    },
    onStatus: onFeedStatus,
  });
  feed.start();

  syncPreviewLabel();
  refreshVoices().then(() => {
    restorePrefs();
    updateVoiceHint();
    syncPreviewLabel();
    for (const rec of records.values()) renderJob(rec);
  });
  poll();
  setInterval(poll, POLL_MS);
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

init();
