// The composer: the form's fields (counted, checked, remembered between visits), the voice list
// and its preview, and submitting a job from the form.

import { api, ApiError, urls } from "./api.js";
import { countChars, looksChinese, nf, voiceLabel, voiceLanguage } from "./format.js";
import { submitJob } from "./jobs.js";
import { followPreview, player } from "./live.js";
import { announce, showFormError } from "./notices.js";
import { readPrefs, writePrefs } from "./store.js";

const $ = (id) => document.getElementById(id);
const root = $("app");
const els = {
  form: $("tts-form"), text: $("text"), count: $("char-count"), textMsg: $("text-msg"),
  voice: $("voice"), voiceHint: $("voice-hint"), preview: $("preview"), format: $("format"),
  speed: $("speed"), speedOut: $("speed-out"), seed: $("seed"), temperature: $("temperature"),
  topP: $("top_p"), topK: $("top_k"), refine: $("refine"), livePlay: $("live-play"),
  submit: $("submit"), submitKbd: $("submit-kbd"), submitHint: $("submit-hint"),
  previewAudio: $("preview-audio"),
};

const config = {
  maxChars: Number(root.dataset.maxChars) || 4000,
  // Longer than maxChars, up to this, a text is a document: made in parts, as WAV or PCM.
  maxDocumentChars: Number(root.dataset.maxDocumentChars) || Number(root.dataset.maxChars) || 4000,
  // The voice a job that names none gets, by its text's language (as the server picks it).
  defaultVoices: JSON.parse(root.dataset.defaultVoices || "{}"),
};

/** The voice the server gives `text` when the form leaves it to the language. */
const autoVoice = (text) => config.defaultVoices[looksChinese(text) ? "zh" : "en"] || "";

const isMac = /Mac|iPhone|iPad|iPod/.test(navigator.userAgentData?.platform || navigator.platform || "");
let submitting = false;

/** Whether new jobs play while they generate ("Play while it generates"). */
export const livePlayOn = () => els.livePlay.checked;
export const focusText = () => els.text.focus();

// ---------------------------------------------------------------------------------------------
// Fields

function readParams() {
  const params = {
    text: els.text.value,
    format: els.format.value,
    speed: Number(els.speed.value),
  };
  if (els.voice.value) params.voice = els.voice.value; // else the server picks by language
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
  const max = config.maxDocumentChars;
  els.count.textContent = `${nf.format(n)} / ${nf.format(max)}`;
  const level = n > max ? "over" : n >= max * 0.9 ? "warn" : "ok";
  if (els.count.dataset.level !== level && level === "over") {
    announce(`Text too long: the limit is ${nf.format(max)} characters.`);
  }
  els.count.dataset.level = level;
  if (n > max) {
    setFieldMessage(`Too long by ${nf.format(n - max)} characters — the limit is ${nf.format(max)}. `
      + "Shorten the text or split it into several jobs.");
  } else if (n > config.maxChars) {
    setFieldMessage(`A document of ${nf.format(n)} characters: it is made in parts, which play `
      + `as they are made; its ${els.format.value.toUpperCase()} file is ready when it ends.`,
    "document");
  } else if (["length", "empty", "document"].includes(els.textMsg.dataset.kind)) {
    setFieldMessage(null);
  }
  updateVoiceHint();
}

function setFieldMessage(message, kind = "length") {
  if (message) {
    els.textMsg.textContent = message;
    els.textMsg.dataset.kind = kind;
    els.textMsg.hidden = false;
    if (kind === "document") els.text.removeAttribute("aria-invalid"); // a fact, not a fault
    else els.text.setAttribute("aria-invalid", "true");
  } else {
    els.textMsg.textContent = "";
    delete els.textMsg.dataset.kind;
    els.textMsg.hidden = true;
    els.text.removeAttribute("aria-invalid");
  }
}

function updateVoiceHint() {
  const text = els.text.value;
  const lang = voiceLanguage(els.voice.value);
  let hint = "";
  if (!els.voice.value && text.trim()) {
    hint = `Read by: ${voiceLabel(autoVoice(text))}.`;
  } else if (text.trim().length >= 4 && lang) {
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
  writePrefs({
    voice: els.voice.value, format: els.format.value, speed: els.speed.value,
    livePlay: els.livePlay.checked,
  });
}

function restorePrefs() {
  const prefs = readPrefs();
  const has = (select, value) => [...select.options].some((o) => o.value === value);
  if (prefs.voice && has(els.voice, prefs.voice)) els.voice.value = prefs.voice;
  if (prefs.format && has(els.format, prefs.format)) els.format.value = prefs.format;
  if (prefs.speed && Number(prefs.speed) >= 0.5 && Number(prefs.speed) <= 2) els.speed.value = prefs.speed;
  if (typeof prefs.livePlay === "boolean") els.livePlay.checked = prefs.livePlay;
}

const PARAM_FIELDS = {
  text: "text", voice: "voice", format: "format", speed: "speed", seed: "seed",
  temperature: "temperature", top_p: "topP", top_k: "topK", refine: "refine",
};

/** Focus the field a server error names ("body.temperature"), marked invalid until edited. */
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
  if (!params.text.trim().replace(/\p{Cf}/gu, "")) {
    setFieldMessage("Type some text first.", "empty");
    els.text.focus();
    return;
  }
  const n = countChars(params.text); // once: a document's text is long
  if (n > config.maxDocumentChars) {
    updateCount();
    els.text.focus();
    return;
  }
  const isDocument = n > config.maxChars;
  player.unlock(); // inside the click / key press: lets live playback start later
  submitting = true;
  els.submit.setAttribute("aria-busy", "true");
  els.submit.classList.add("is-busy");
  els.submit.querySelector(".btn-label").textContent = "Submitting…";
  try {
    await submitJob(params, { autoplay: els.livePlay.checked, document: isDocument });
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

// ---------------------------------------------------------------------------------------------
// Voice list and preview

// The request fields of the advanced settings, as the engines' capabilities name them.
const KNOBS = { seed: "seed", temperature: "temperature", top_p: "Top P", top_k: "Top K", refine: "refine" };

/** Offer only the advanced settings the running engines honour (their capabilities list them):
 * the others are hidden, and the whole section when none is left; all of them when no worker
 * runs or none says. */
function showKnobs(body) {
  const hint = document.getElementById("knobs-hint");
  const engines = Array.isArray(body?.engines) ? body.engines : [];
  const known = engines.filter((e) => Array.isArray(e?.capabilities?.knobs));
  const honoured = new Set(known.flatMap((e) => e.capabilities.knobs));
  const ignored = known.length ? Object.keys(KNOBS).filter((knob) => !honoured.has(knob)) : [];
  for (const knob of Object.keys(KNOBS)) {
    const input = document.getElementById(knob);
    const holder = input?.closest(".field") || input?.closest("label");
    if (holder) holder.hidden = ignored.includes(knob);
  }
  const advanced = document.querySelector("details.advanced");
  if (advanced) advanced.hidden = ignored.length === Object.keys(KNOBS).length;
  if (!hint) return;
  hint.hidden = !ignored.length;
  hint.textContent = hint.hidden ? "" : `Not offered: the running engines ignore ${ignored.map((k) => KNOBS[k]).join(", ")}.`;
}

/** Rebuild the voice list from /v1/voices when it differs from what the server rendered. */
async function refreshVoices() {
  let body;
  try {
    body = await api.voices();
  } catch {
    return; // the server-rendered list stays
  }
  showKnobs(body);
  const voices = Array.isArray(body?.voices) ? body.voices.filter((v) => v && typeof v.name === "string") : [];
  if (!voices.length) return;
  const current = [...els.voice.options].map((o) => o.value).filter(Boolean).sort().join("\n");
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
  fragment.append(els.voice.options[0]?.value === "" ? els.voice.options[0] : new Option("Automatic", ""));
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
  els.voice.value = voices.some((v) => v.name === selected) ? selected : "";
}

/** The voice list as the server has it now; resolves once the form shows it. */
export async function loadVoices() {
  await refreshVoices();
  restorePrefs();
  updateVoiceHint();
  syncPreviewLabel();
}

const PREVIEW_TEXT = {
  zh: "你好，很高兴认识你。这是我的声音。",
  en: "Hello! This is how I sound.",
};
const previewCache = new Map(); // voice -> audio URL

async function previewVoice() {
  const audio = els.previewAudio;
  const label = els.preview.querySelector(".btn-label");
  if (!audio.paused) {
    audio.pause();
    return;
  }
  if (els.preview.getAttribute("aria-busy") === "true") return;
  const voice = els.voice.value || autoVoice(els.text.value);
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
    const snap = await followPreview(id, res.job, 30000);
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

function syncPreviewLabel() {
  const playing = !els.previewAudio.paused;
  const voice = voiceLabel(els.voice.value || autoVoice(els.text.value));
  els.preview.setAttribute("aria-label", `${playing ? "Stop the preview of" : "Preview"} the voice ${voice}`);
}

function syncPreviewButton() {
  const playing = !els.previewAudio.paused;
  els.preview.querySelector(".btn-label").textContent = playing ? "Stop" : "Preview";
  els.preview.classList.toggle("is-playing", playing);
  syncPreviewLabel();
}

// ---------------------------------------------------------------------------------------------
// Wiring

export function initComposer() {
  if (isMac) {
    els.submitKbd.textContent = "⌘ ↵";
    els.submitHint.textContent = "Press Command and Enter to synthesize.";
  }
  restorePrefs();
  updateSpeed();
  updateCount();
  syncPreviewLabel();

  els.text.addEventListener("input", updateCount);
  els.format.addEventListener("change", updateCount);
  document.getElementById("text-file")?.addEventListener("change", async (event) => {
    const file = event.target.files?.[0];
    if (!file) return;
    els.text.value = await file.text(); // a book: a document, made in parts
    updateCount();
    announce(`Loaded ${file.name}: ${nf.format(countChars(els.text.value))} characters.`);
    els.text.focus();
  });
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
}
