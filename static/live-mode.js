// The page's Live mode: a text typed into a live session a few characters at a time at the chosen
// rate (as a chat model writes), its audio played as it comes on the page's player, each word lit
// as it is spoken (from the alignment of the audio frames), and Stop: barge-in, silence at once.

import { player } from "./live.js";
import { LiveSession } from "./live-session.js";

const $ = (id) => document.getElementById(id);
const els = {
  modeJobs: $("mode-jobs"), modeLive: $("mode-live"), jobForm: $("tts-form"), form: $("live-form"),
  text: $("live-text"), voice: $("live-voice"), voices: $("voice"), rate: $("live-rate"),
  rateOut: $("live-rate-out"), speak: $("live-speak"), stop: $("live-stop"), stage: $("live-stage"),
  status: $("live-status"), spoken: $("live-spoken"), error: $("live-error"),
  errorBody: $("live-error-body"),
};

const TICK_MS = 40; // how often words are lit and the played time is counted
const MAX_PIECE = 6; // characters per typed piece: 1 to this, like a model's tokens
const CLEARED_WAIT_MS = 3000; // after Stop: how long "cleared" may take before the socket closes
const STATUS = {
  connecting: "Connecting…", speaking: "Speaking…", stopping: "Stopping…", stopped: "Stopped.",
  done: "Done.", failed: "The live session failed.",
};

let current = null; // the run in progress
let runs = 0;

export function initLiveMode() {
  for (const radio of [els.modeJobs, els.modeLive]) radio.addEventListener("change", showMode);
  els.rate.addEventListener("input", showRate);
  els.form.addEventListener("submit", (event) => {
    event.preventDefault();
    speak();
  });
  els.form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.isComposing) {
      event.preventDefault();
      speak();
    }
  });
  els.stop.addEventListener("click", () => stop());
  showRate();
  showMode();
}

function showMode() {
  const live = els.modeLive.checked;
  els.jobForm.hidden = live;
  els.form.hidden = !live;
  if (live) copyVoices();
  else if (current) stop();
}

/** The job form's voices (the server's, loaded after the page) in the live form's list. */
function copyVoices() {
  const chosen = els.voice.value || els.voices.value;
  els.voice.replaceChildren(...[...els.voices.children].map((node) => node.cloneNode(true)));
  els.voice.value = chosen;
  if (els.voice.value !== chosen) els.voice.value = "";
}

function showRate() {
  const rate = Number(els.rate.value);
  els.rateOut.textContent = `${rate} tokens/s`;
  els.rate.setAttribute("aria-valuetext", `${rate} tokens per second`);
}

/** The text cut into pieces of 1 to MAX_PIECE characters (whole code points). */
function pieces(text) {
  const chars = Array.from(text);
  const out = [];
  for (let i = 0; i < chars.length;) {
    const size = 1 + Math.floor(Math.random() * MAX_PIECE);
    out.push(chars.slice(i, i + size).join(""));
    i += size;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// A run: one session, from Speak to done, Stop or failure

function speak() {
  const text = els.text.value;
  if (!text.trim()) {
    showError("Type some text to speak first.");
    els.text.focus();
    return;
  }
  if (current) stop();
  if (!player.unlock()) {
    showError("This browser cannot play audio here (no Web Audio).");
    return;
  }
  player.stopAll();
  showError(null);
  runs += 1;
  const run = {
    id: `live-${runs}`, pieces: pieces(text), sent: 0, typer: null, timer: null, session: null,
    words: [], word: null, lit: 0, litNode: null, audio: [], done: false, over: false,
    stopping: false, endAt: 0,
  };
  current = run;
  els.spoken.replaceChildren();
  Object.assign(els.stage.dataset, { playedS: "0", litWords: "0" });
  setState(run, "connecting");
  els.speak.disabled = true;
  els.stop.disabled = false;
  player.startPush(run.id);
  run.session = new LiveSession({
    opened: () => typeNext(run),
    audio: (header, bytes) => heard(run, header, bytes),
    segment: () => endWord(run),
    cleared: () => finish(run, "stopped"),
    done: () => ended(run),
    error: (error) => failed(run, error.message),
  });
  const options = els.voice.value ? { voice: els.voice.value } : {};
  run.session.open(options);
  run.timer = setInterval(() => tick(run), TICK_MS);
}

/** Type the next piece, then wait a token's time at the rate chosen now; close at the end. */
function typeNext(run) {
  if (run.over || run.stopping) return;
  if (run.sent === 0) setState(run, "speaking");
  if (run.sent >= run.pieces.length) {
    run.session.close();
    return;
  }
  run.session.text(run.pieces[run.sent]);
  run.sent += 1;
  run.typer = setTimeout(() => typeNext(run), 1000 / Number(els.rate.value));
}

/** A piece of audio: played right after the previous one; its characters' times, on the
 * AudioContext's clock, become the words to light. A piece without audio (the last characters
 * of a segment, a mark) is placed where the audio so far ends. */
function heard(run, header, bytes) {
  if (run.over || run.stopping) return;
  let at;
  if (bytes.length >= 2) {
    at = player.push(run.id, bytes);
    if (at === null) return;
    run.audio.push({ at, duration: bytes.length / 2 / (player.jobs.get(run.id)?.sampleRate || 24000) });
  } else {
    const last = run.audio[run.audio.length - 1];
    at = last ? last.at + last.duration : player.ctx.currentTime;
  }
  const align = header.alignment || {};
  const chars = align.chars || [];
  const starts = align.char_start_ms || [];
  for (let i = 0; i < chars.length; i += 1) {
    if (/\s/.test(chars[i])) {
      endWord(run);
    } else if (run.word) {
      run.word.text += chars[i];
    } else {
      run.word = { text: chars[i], at: at + ((starts[i] ?? header.start_ms) - header.start_ms) / 1000 };
    }
  }
}

function endWord(run) {
  if (run.word) run.words.push(run.word);
  run.word = null;
}

function ended(run) {
  if (run.over) return;
  run.done = true;
  endWord(run);
  player.endPush(run.id);
  const last = run.audio[run.audio.length - 1];
  run.endAt = last ? last.at + last.duration : 0;
}

/** Light the words whose time has come, count the seconds played, notice the end. */
function tick(run) {
  if (run.over) return;
  const now = player.ctx ? player.ctx.currentTime : 0;
  while (run.lit < run.words.length && run.words[run.lit].at <= now) light(run, run.words[run.lit]);
  const played = run.audio.reduce((sum, a) => sum + Math.min(a.duration, Math.max(0, now - a.at)), 0);
  els.stage.dataset.playedS = played.toFixed(2);
  if (run.done && now >= run.endAt) {
    while (run.lit < run.words.length) light(run, run.words[run.lit]);
    finish(run, "done");
  } else if (!run.stopping && !player.has(run.id)) {
    stop(); // other audio on the page took over (one sound at a time)
  }
}

function light(run, word) {
  run.litNode?.classList.replace("lit", "said");
  if (run.lit) els.spoken.append(" ");
  const node = document.createElement("span");
  node.className = "lit";
  node.textContent = word.text;
  els.spoken.append(node);
  run.litNode = node;
  run.lit += 1;
  els.stage.dataset.litWords = String(run.lit);
}

/** Stop: barge-in (the server drops the rest) and silence now; over once "cleared" comes. */
export function stop() {
  const run = current;
  if (!run || run.over || run.stopping) return;
  run.stopping = true;
  clearTimeout(run.typer);
  player.stop(run.id);
  setState(run, "stopping");
  if (!run.session.clear()) {
    finish(run, "stopped");
    return;
  }
  setTimeout(() => finish(run, "stopped"), CLEARED_WAIT_MS);
}

function failed(run, message) {
  if (run.over) return;
  showError(message);
  finish(run, "failed");
}

function finish(run, state) {
  if (run.over) return;
  run.over = true;
  clearTimeout(run.typer);
  clearInterval(run.timer);
  run.litNode?.classList.replace("lit", "said");
  run.session.disconnect();
  player.forget(run.id);
  setState(run, state);
  if (current === run) {
    current = null;
    const focused = document.activeElement === els.stop;
    els.stop.disabled = true;
    els.speak.disabled = false;
    if (focused) els.speak.focus();
  }
}

function setState(run, state) {
  if (current !== run) return;
  els.stage.dataset.state = state;
  els.status.textContent = STATUS[state];
}

function showError(message) {
  els.error.hidden = !message;
  els.errorBody.textContent = message || "";
}
