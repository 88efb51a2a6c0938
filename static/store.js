// The jobs this browser knows (records) and what it keeps in localStorage: the job history
// (shared by the tabs, kept across reloads), the event cursor and the composer's preferences.

import { TERMINAL } from "./api.js";

export const STORE_JOBS = "chattts.v1.jobs";
const STORE_CURSOR = "chattts.v1.cursor";
const STORE_PREFS = "chattts.v1.prefs";
// Jobs a person removed from the list: the server's list of this client's jobs never brings
// them back. The newest ids only (a list a person clears by hand stays far smaller).
const STORE_FORGOTTEN = "chattts.v1.forgotten";
const MAX_RECORDS = 100;
const MAX_FORGOTTEN = 1000;

/** Job id -> record: what the list shows and what is kept. */
export const records = new Map();

export const createdAt = (rec) => rec.snap?.created_at ?? rec.submittedAt;
export const stateOf = (rec) => (rec.expired ? "expired" : rec.snap?.state || "queued");
export const isActive = (rec) => !rec.expired && !TERMINAL.has(stateOf(rec));

/** Newest first. */
export function sortedRecords() {
  return [...records.values()].sort((a, b) => createdAt(b) - createdAt(a));
}

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

function loadRecord(raw) {
  if (!raw || typeof raw.id !== "string" || typeof raw.text !== "string" || !raw.params) return null;
  return {
    id: raw.id, text: raw.text, params: raw.params, snap: raw.snap || null,
    position: raw.position ?? null, timeline: Array.isArray(raw.timeline) ? raw.timeline : [],
    submittedAt: raw.submittedAt || Date.now() / 1000, expired: Boolean(raw.expired),
    partial: Boolean(raw.partial), fresh: false, autoplay: false, cancelPending: false, actionError: null,
  };
}

/** The records kept in localStorage (valid ones only), not yet in `records`. */
export function storedRecords() {
  const stored = readStore(STORE_JOBS, []);
  return Array.isArray(stored) ? stored.map(loadRecord).filter(Boolean) : [];
}

let cursorOf = () => null;

/** Where saveNow() finds the event cursor to keep (the live feed's). */
export function keepCursorOf(getCursor) {
  cursorOf = getCursor;
}

/** The kept event cursor, when it looks like a stream id. */
export function storedCursor() {
  const cursor = readStore(STORE_CURSOR, null);
  return typeof cursor === "string" && /^\d+(-\d+)?$/.test(cursor) ? cursor : null;
}

let saveTimer = null;
export function scheduleSave() {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(saveNow, 250);
}

export function saveNow() {
  clearTimeout(saveTimer);
  const list = sortedRecords().slice(0, MAX_RECORDS).map((r) => ({
    id: r.id, text: r.text, params: r.params, snap: r.snap, position: r.position,
    timeline: r.timeline, submittedAt: r.submittedAt, expired: r.expired || undefined,
    partial: r.partial || undefined,
  }));
  writeStore(STORE_JOBS, list);
  const cursor = cursorOf();
  if (cursor) writeStore(STORE_CURSOR, cursor);
}

/** Remember that a person removed these jobs from the list. */
export function forgetIds(ids) {
  const kept = [...forgottenIds()].filter((id) => !ids.includes(id));
  writeStore(STORE_FORGOTTEN, [...kept, ...ids].slice(-MAX_FORGOTTEN));
}

export function forgottenIds() {
  const stored = readStore(STORE_FORGOTTEN, []);
  return new Set(Array.isArray(stored) ? stored.filter((id) => typeof id === "string") : []);
}

export const readPrefs = () => readStore(STORE_PREFS, {});
export const writePrefs = (prefs) => writeStore(STORE_PREFS, prefs);
