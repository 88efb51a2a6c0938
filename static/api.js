// HTTP API and the live event feed. No DOM here: this module only talks to the server.

export const TERMINAL = new Set(["succeeded", "failed", "cancelled", "dead"]);
export const EVENT_TYPES = [
  "queued", "running", "progress", "cancelling", "succeeded", "failed", "cancelled", "dead",
];

/** An error a person can understand: `title` and `message` are safe to show as text. */
export class ApiError extends Error {
  constructor({ kind, status = 0, title, message, param = null, code = null, retryAfter = null }) {
    super(message);
    this.kind = kind; // validation | too_large | rate_limited | unavailable | network | not_found | server
    this.status = status;
    this.title = title;
    this.param = param;
    this.code = code;
    this.retryAfter = retryAfter; // seconds, or null
  }
}

function parseRetryAfter(value) {
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds));
  const when = Date.parse(value);
  return Number.isFinite(when) ? Math.max(0, Math.ceil((when - Date.now()) / 1000)) : null;
}

/** Keep server messages short and single-line; never show a stack trace or an HTML page. */
function cleanMessage(text) {
  if (typeof text !== "string") return "";
  const firstLine = text.split(/\r?\n/)[0].trim();
  if (/^traceback|^<!doctype|^<html/i.test(firstLine)) return "";
  if (!firstLine) return "";
  const short = firstLine.length > 300 ? `${firstLine.slice(0, 297)}…` : firstLine;
  // Server messages are written for developers ("invalid 'speed': ..."); make them sentences.
  const sentence = short[0].toUpperCase() + short.slice(1);
  return /[.!?…]$/.test(sentence) ? sentence : `${sentence}.`;
}

async function errorFrom(response) {
  let detail = {};
  const type = response.headers.get("Content-Type") || "";
  if (type.includes("json")) {
    try {
      const body = await response.json();
      detail = (body && typeof body.error === "object" && body.error) || body || {};
    } catch {
      detail = {};
    }
  }
  const message = cleanMessage(detail.message);
  const retryAfter = parseRetryAfter(response.headers.get("Retry-After"));
  const base = { status: response.status, param: detail.param ?? null, code: detail.code ?? null, retryAfter };
  const titles = {
    text_too_long: "Text too long", text_empty: "Nothing to say",
    text_not_speakable: "Nothing to say", unknown_voice: "Unknown voice",
  };
  switch (response.status) {
    case 400:
    case 422:
      return new ApiError({ ...base, kind: "validation", title: titles[detail.code] || "Please check the request",
        message: message || "The server did not accept these settings." });
    case 413:
      return new ApiError({ ...base, kind: "too_large", title: "Text too long",
        message: message || "The request is larger than the server accepts. Shorten the text." });
    case 415:
      return new ApiError({ ...base, kind: "validation", title: "Unsupported request",
        message: message || "The server expected JSON." });
    case 404:
      return new ApiError({ ...base, kind: "not_found", title: "Not found",
        message: message || "This job is no longer on the server." });
    case 429:
      return new ApiError({ ...base, kind: "rate_limited", title: "Too many requests",
        message: message || "You are sending jobs faster than the service accepts them." });
    case 502:
    case 503:
    case 504:
      return new ApiError({ ...base, kind: "unavailable", title: "Service unavailable",
        message: message || "The speech service is temporarily unavailable." });
    default:
      return new ApiError({ ...base, kind: "server", title: `Server error (${response.status})`,
        message: message || "Something went wrong on the server. Please try again." });
  }
}

async function request(method, url, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch {
    throw new ApiError({ kind: "network", title: "Cannot reach the server",
      message: "Check your connection; the page keeps your text, so you can try again." });
  }
  if (!response.ok) throw await errorFrom(response);
  try {
    return await response.json();
  } catch {
    throw new ApiError({ kind: "server", status: response.status, title: "Unexpected answer",
      message: "The server sent a reply this page cannot read." });
  }
}

export const api = {
  submit: (params) => request("POST", "/v1/tts/jobs", params),
  get: (id) => request("GET", `/v1/tts/jobs/${encodeURIComponent(id)}`),
  cancel: (id) => request("DELETE", `/v1/tts/jobs/${encodeURIComponent(id)}`),
  voices: () => request("GET", "/v1/voices"),
  myJobs: (limit) => request("GET", `/v1/tts/jobs?limit=${limit}`),
};

export const urls = {
  audio: (id) => `/v1/tts/jobs/${encodeURIComponent(id)}/audio`,
  download: (id) => `/v1/tts/jobs/${encodeURIComponent(id)}/audio?download=1`,
  subtitles: (id) => `/v1/tts/jobs/${encodeURIComponent(id)}/subtitles?format=srt&download=1`,
  segment: (id, n) => `/v1/tts/jobs/${encodeURIComponent(id)}/segments/${n}`,
  stream: (id) => `/v1/tts/jobs/${encodeURIComponent(id)}/stream`,
};

/** Compare two Redis stream ids ("ms-seq"). */
export function compareIds(a, b) {
  const [am, as = "0"] = String(a).split("-");
  const [bm, bs = "0"] = String(b).split("-");
  const d = Number(am) - Number(bm);
  if (d !== 0) return d < 0 ? -1 : 1;
  const e = Number(as) - Number(bs);
  return e === 0 ? 0 : e < 0 ? -1 : 1;
}

const shellQuote = (s) => `'${String(s).replace(/'/g, "'\\''")}'`;

/** A curl command that submits the same request. */
export function curlCommand(origin, params) {
  const body = JSON.stringify(params);
  return [
    `curl -sS -X POST ${shellQuote(`${origin}/v1/tts/jobs`)}`,
    `  -H 'Content-Type: application/json'`,
    `  --data-raw ${shellQuote(body)}`,
  ].join(" \\\n");
}

/**
 * The per-browser event stream (GET /v1/events) with resume.
 *
 * EventSource reconnects by itself after a network error and sends Last-Event-ID; when the
 * server answers with an error instead (503 ...), EventSource gives up, so we reopen it with
 * ?last_event_id= and a growing pause. Events at or before the cursor are dropped, so a replay
 * that overlaps what we already have is harmless.
 */
export class EventFeed {
  constructor({ url = "/v1/events", cursor = null, onEvent, onStatus }) {
    this.url = url;
    this.cursor = cursor;
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.source = null;
    this.everOpen = false;
    this.down = false;
    this.failures = 0;
    this.timer = null;
    this.state = "connecting";
  }

  start() {
    this.open();
    // A page back from the bfcache or a laptop waking up: make sure the stream is alive.
    window.addEventListener("online", () => this.poke());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.poke();
    });
  }

  poke() {
    if (!this.source || this.source.readyState === EventSource.CLOSED) {
      clearTimeout(this.timer);
      this.open();
    }
  }

  setState(state, detail = {}) {
    this.state = state;
    this.onStatus(state, detail);
  }

  open() {
    this.timer = null;
    const url = new URL(this.url, window.location.href);
    if (this.cursor) url.searchParams.set("last_event_id", this.cursor);
    const source = new EventSource(url.toString(), { withCredentials: true });
    this.source = source;
    source.onopen = () => {
      if (source !== this.source) return;
      this.failures = 0;
      const resumed = this.everOpen && this.down;
      this.everOpen = true;
      this.down = false;
      this.setState("open", { resumed });
    };
    source.onerror = () => {
      if (source !== this.source) return;
      this.down = true;
      if (source.readyState === EventSource.CLOSED) {
        this.failures += 1;
        const delay = Math.min(15000, 1000 * 2 ** Math.min(this.failures - 1, 4));
        const jitter = Math.round(delay * 0.2 * Math.random());
        this.setState("closed", { retryInMs: delay + jitter });
        clearTimeout(this.timer);
        this.timer = setTimeout(() => this.open(), delay + jitter);
      } else {
        this.setState("reconnecting");
      }
    };
    const handler = (event) => this.handle(event);
    for (const type of EVENT_TYPES) source.addEventListener(type, handler);
    source.addEventListener("message", handler);
  }

  handle(event) {
    const id = event.lastEventId || null;
    if (id && this.cursor && compareIds(id, this.cursor) <= 0) return; // already seen
    let data;
    try {
      data = JSON.parse(event.data);
    } catch {
      return;
    }
    if (!data || typeof data !== "object") return;
    if (id) this.cursor = id;
    const type = event.type === "message" ? data.type : event.type;
    this.onEvent(type, data, id);
  }
}
