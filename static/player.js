// Gapless playback as the audio is made (Web Audio, one AudioContext timeline: Chromium, Firefox,
// Safari): a streaming job's PCM chunks read from one fetch body, or, where fetch bodies cannot be
// read as streams, its finished segments; or the PCM a live session pushes. And the helpers that
// make raw PCM playable in <audio>.

const GAP_S = 0.12; // the pause the worker puts between segments in the final file
const LEAD_S = 0.1; // head room for the first buffer: absorbs the jitter of the next chunks
const RATE = 24000; // every engine delivers 24 kHz mono
// A chunk stream cut mid-job resumes from the byte it reached, after these pauses (about as
// long as the event stream's own back-off takes to reach a server that is back).
const RETRY_DELAYS_MS = [300, 1000, 2000, 4000, 4000, 4000, 4000, 4000];
const MIN_BYTES = 2 * 480; // 20 ms: smaller reads wait for the next (fewer, larger buffers)
// A context may stay suspended for a while after a gesture only because the sound device is
// opening (Firefox on PulseAudio: up to 2 s seen). Still suspended after this long, and where the
// engine cannot say (navigator.getAutoplayPolicy: Firefox only), autoplay was refused.
const START_GRACE_MS = 2500;

/** Chunks can be streamed where a fetch body is a ReadableStream (feature detection, no UA). */
export function canStreamChunks() {
  return typeof ReadableStream === "function" && typeof Response === "function"
    && "body" in Response.prototype && Boolean(window.AudioContext || window.webkitAudioContext);
}

/** Wrap 16-bit little-endian mono PCM in a WAV header. */
export function pcmToWav(buffer, sampleRate = 24000) {
  const data = new Uint8Array(buffer);
  const out = new ArrayBuffer(44 + data.byteLength);
  const view = new DataView(out);
  const ascii = (offset, text) => {
    for (let i = 0; i < text.length; i += 1) view.setUint8(offset + i, text.charCodeAt(i));
  };
  ascii(0, "RIFF");
  view.setUint32(4, 36 + data.byteLength, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  ascii(36, "data");
  view.setUint32(40, data.byteLength, true);
  new Uint8Array(out, 44).set(data);
  return new Blob([out], { type: "audio/wav" });
}

/**
 * One AudioContext, created on the first user gesture (submit), shared by all jobs.
 * Per job: segments are fetched as soon as their `progress` event arrives (in parallel), decoded
 * and scheduled strictly in order, back to back. Any failure marks the job "broken": the caller
 * then falls back to the final file.
 */
export class LivePlayer {
  constructor({ onChange } = {}) {
    this.ctx = null;
    this.resumedAt = 0;
    this.jobs = new Map();
    this.onChange = onChange || (() => {});
  }

  /** Call from a user gesture: browsers only let audio start after one (iOS: only in one). */
  unlock() {
    const Ctx = window.AudioContext || window.webkitAudioContext;
    if (!Ctx) return false;
    if (!this.ctx) {
      // At the engines' own rate, chunks are never resampled one by one (a click at each seam);
      // an engine that refuses the option gets its default rate and resamples per buffer.
      for (const options of [{ latencyHint: "playback", sampleRate: RATE }, {}]) {
        try {
          this.ctx = new Ctx(options);
          break;
        } catch {
          /* try the next */
        }
      }
      if (!this.ctx) return false;
      this.ctx.onstatechange = () => this.onContextState();
      // iOS: Web Audio is silenced by the ring/silent switch unless the page says it plays
      // media (Safari 17+; elsewhere there is no such object).
      if (navigator.audioSession) {
        try {
          navigator.audioSession.type = "playback";
        } catch {
          /* an engine that refuses the type keeps its default */
        }
      }
    }
    this.resume();
    return true;
  }

  /** Resume a suspended context (from a gesture: the "Play" button of a blocked job). */
  resume() {
    if (!this.ctx || this.ctx.state !== "suspended") return;
    this.resumedAt = performance.now();
    this.ctx.resume().catch(() => {}).finally(() => this.onContextState());
    setTimeout(() => this.onContextState(), START_GRACE_MS + 50);
  }

  /** Whether the engine refused to start audio without a gesture (iOS, Chrome's policy). */
  blocked() {
    if (!this.ctx || this.ctx.state !== "suspended") return false;
    const policy = navigator.getAutoplayPolicy?.(this.ctx);
    if (policy === "disallowed") return true;
    if (policy === "allowed") return false; // suspended only while the device opens
    return performance.now() - (this.resumedAt || 0) > START_GRACE_MS;
  }

  /** Autoplay refused (the context stays suspended): jobs with audio waiting show "Play". */
  onContextState() {
    const blocked = this.blocked();
    for (const [jobId, s] of this.jobs) {
      if (s.stopped || s.broken) continue;
      if (blocked && s.scheduled > 0) this.setStatus(jobId, s, "blocked");
      else if (!blocked && s.status === "blocked") this.setStatus(jobId, s, "playing");
    }
  }

  /** What was scheduled for a job: [{at, duration, late}] on the context's clock (diagnostics). */
  timeline(jobId) {
    const s = this.jobs.get(jobId);
    return s ? s.log.map((e) => ({ ...e })) : [];
  }

  has(jobId) {
    const s = this.jobs.get(jobId);
    return Boolean(s && !s.stopped);
  }

  /** Play a job's finished segments as their `progress` events arrive (the fallback). */
  start(jobId, { format, sampleRate = RATE, urlFor }) {
    if (!this.ctx) return;
    this.jobs.set(jobId, { ...this.fresh(), mode: "segments", format, sampleRate, urlFor });
  }

  /** Play a streaming job's PCM chunks from `url` (GET /v1/tts/jobs/{id}/stream) as they come. */
  startStream(jobId, { url, sampleRate = RATE }) {
    if (!this.ctx) return;
    const s = { ...this.fresh(), mode: "chunks", format: "pcm", sampleRate, url, received: 0 };
    this.jobs.set(jobId, s);
    this.readStream(jobId, s, 0);
  }

  /** Play PCM the caller pushes (a live session's binary frames): `push` schedules a piece right
   * after the previous one and returns where it starts on the context's clock (null: stopped). */
  startPush(jobId, { sampleRate = RATE } = {}) {
    if (!this.ctx) return false;
    this.jobs.set(jobId, { ...this.fresh(), mode: "chunks", format: "pcm", sampleRate, received: 0 });
    return true;
  }

  push(jobId, bytes) {
    const s = this.jobs.get(jobId);
    if (!s || s.stopped || bytes.length < 2) return null;
    return this.schedulePcm(jobId, s, bytes.subarray(0, bytes.length - (bytes.length % 2)));
  }

  endPush(jobId) {
    const s = this.jobs.get(jobId);
    if (!s || s.stopped) return;
    s.streamDone = true;
    if (!s.sources.size) this.setStatus(jobId, s, "ended");
  }

  fresh() {
    return {
      chain: Promise.resolve(), next: 1, nextTime: 0, firstStart: null, log: [],
      sources: new Set(), scheduled: 0, broken: false, stopped: false, finished: false,
      streamDone: false, playedS: 0, status: "waiting", abort: null,
    };
  }

  async readStream(jobId, s, attempt) {
    const abort = new AbortController();
    s.abort = abort;
    const from = s.received;
    let carry = new Uint8Array(0); // bytes not yet played: an odd byte, or a read under MIN_BYTES
    try {
      const url = s.received ? `${s.url}?offset=${s.received}` : s.url;
      const response = await fetch(url, { credentials: "same-origin", signal: abort.signal });
      if (!response.ok) throw new Error(`stream: HTTP ${response.status}`);
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (s.stopped || s.broken) return;
        if (done) break;
        const bytes = new Uint8Array(carry.length + value.length);
        bytes.set(carry);
        bytes.set(value, carry.length);
        const usable = bytes.length < MIN_BYTES ? 0 : bytes.length - (bytes.length % 2);
        carry = bytes.slice(usable);
        if (usable) this.schedulePcm(jobId, s, bytes.subarray(0, usable));
      }
      if (carry.length >= 2) this.schedulePcm(jobId, s, carry.subarray(0, carry.length - (carry.length % 2)));
      s.streamDone = true;
      if (s.received === 0) {
        // Nothing streamed (a cache hit): the final file plays instead.
        this.markBroken(jobId, s);
      } else if (!s.sources.size) {
        this.setStatus(jobId, s, "ended");
      }
    } catch (err) {
      if (s.stopped || s.broken) return;
      // A cut connection: ask again from the byte reached (the chunks stay on the server);
      // `carry`, under 20 ms and not yet counted, comes again with the rest.
      const refused = err instanceof Error && /HTTP 4/.test(err.message); // will not change
      const tries = s.received > from ? 0 : attempt; // it got somewhere: a fresh series
      if (tries < RETRY_DELAYS_MS.length && !refused) {
        setTimeout(() => {
          if (!s.stopped && !s.broken) this.readStream(jobId, s, tries + 1);
        }, RETRY_DELAYS_MS[tries]);
        return;
      }
      this.markBroken(jobId, s);
    }
  }

  /** Schedule 16-bit PCM right after what is already scheduled. */
  schedulePcm(jobId, s, bytes) {
    const ints = new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
    s.received += bytes.length;
    const buffer = this.ctx.createBuffer(1, ints.length, s.sampleRate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < ints.length; i += 1) channel[i] = ints[i] / 32768;
    return this.schedule(jobId, s, buffer, 0);
  }

  markBroken(jobId, s) {
    if (s.broken) return;
    s.broken = true;
    s.playedS = this.playedSeconds(s);
    this.silence(s);
    this.setStatus(jobId, s, "broken");
  }

  /** Segment `index` (1-based) of `total` is ready on the server. */
  segment(jobId, index, total) {
    const s = this.jobs.get(jobId);
    if (!s || s.mode !== "segments" || s.stopped || s.broken || total < 2) return;
    for (; s.next <= index; s.next += 1) this.enqueue(jobId, s, s.next);
  }

  enqueue(jobId, s, n) {
    const fetched = fetch(s.urlFor(n), { credentials: "same-origin" }).then((r) => {
      if (!r.ok) throw new Error(`segment ${n}: HTTP ${r.status}`);
      return r.arrayBuffer();
    });
    fetched.catch(() => {}); // handled in the chain; avoid an "unhandled rejection" meanwhile
    s.chain = s.chain
      .then(async () => {
        const bytes = await fetched;
        if (s.stopped || s.broken) return;
        const buffer = await this.decode(bytes, s);
        if (s.stopped || s.broken) return;
        this.schedule(jobId, s, buffer, GAP_S);
      })
      .catch(() => {
        if (!s.stopped) this.markBroken(jobId, s);
      });
  }

  decode(bytes, s) {
    if (s.format === "pcm") {
      const ints = new Int16Array(bytes, 0, Math.floor(bytes.byteLength / 2));
      const buffer = this.ctx.createBuffer(1, Math.max(1, ints.length), s.sampleRate);
      const channel = buffer.getChannelData(0);
      for (let i = 0; i < ints.length; i += 1) channel[i] = ints[i] / 32768;
      return Promise.resolve(buffer);
    }
    // The callback form as well: older Safari has no promise-returning decodeAudioData.
    return new Promise((resolve, reject) => {
      const p = this.ctx.decodeAudioData(bytes, resolve, reject);
      if (p && typeof p.catch === "function") p.catch(reject);
    });
  }

  /**
   * Start `buffer` where the previous one ends (then `gapS` of silence), or, when it came too
   * late for that, as soon as possible: a late buffer leaves a silence, never an overlap or a cut.
   * Returns when it starts.
   */
  schedule(jobId, s, buffer, gapS) {
    const ctx = this.ctx;
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    const earliest = ctx.currentTime + (s.firstStart === null ? LEAD_S : 0.01);
    const late = s.firstStart !== null && earliest > s.nextTime;
    const at = Math.max(earliest, s.nextTime);
    source.start(at);
    if (s.firstStart === null) s.firstStart = at;
    s.log.push({ at, duration: buffer.duration, late });
    if (s.log.length > 4000) s.log.shift();
    s.nextTime = at + buffer.duration + gapS;
    s.scheduled += 1;
    s.sources.add(source);
    source.onended = () => {
      s.sources.delete(source);
      if (!s.sources.size && !s.stopped && !s.broken) this.setStatus(jobId, s, this.drained(s));
    };
    this.setStatus(jobId, s, this.blocked() ? "blocked" : "playing");
    return at;
  }

  /** The status once everything scheduled has played: over, or waiting for more. */
  drained(s) {
    if (s.mode === "chunks") return s.streamDone ? "ended" : "buffering";
    return s.finished && s.next > s.scheduled ? "ended" : "waiting";
  }

  playedSeconds(s) {
    if (!this.ctx || s.firstStart === null) return 0;
    return Math.max(0, this.ctx.currentTime - s.firstStart);
  }

  /**
   * The job is over. Returns {covered, resumeAt}: covered when streaming played (or is playing)
   * every segment, else where the final file should start to continue seamlessly.
   */
  finish(jobId, { succeeded }) {
    const s = this.jobs.get(jobId);
    if (!s) return { covered: false, resumeAt: 0 };
    s.finished = true;
    if (!succeeded) {
      this.stop(jobId);
      return { covered: false, resumeAt: 0 };
    }
    if (s.stopped) return { covered: true, resumeAt: 0 }; // the person stopped it: stay quiet
    if (s.mode === "chunks") {
      // The stream delivers the rest (or, empty, hands over to the file: markBroken).
      if (!s.broken) return { covered: true, resumeAt: 0 };
      const resumeAt = s.playedS;
      this.forget(jobId);
      return { covered: false, resumeAt };
    }
    if (s.broken || s.scheduled === 0 && s.next === 1) {
      const resumeAt = s.broken ? s.playedS : 0;
      this.forget(jobId);
      return { covered: false, resumeAt };
    }
    if (!s.sources.size && s.scheduled >= s.next - 1) this.setStatus(jobId, s, "ended");
    return { covered: true, resumeAt: 0 };
  }

  stop(jobId) {
    const s = this.jobs.get(jobId);
    if (!s) return;
    s.stopped = true;
    this.silence(s);
    this.setStatus(jobId, s, "stopped");
  }

  stopAll(exceptJobId = null) {
    for (const id of this.jobs.keys()) if (id !== exceptJobId) this.stop(id);
  }

  forget(jobId) {
    const s = this.jobs.get(jobId);
    if (!s) return;
    this.silence(s);
    this.jobs.delete(jobId);
    this.onChange(jobId, "idle");
  }

  silence(s) {
    s.abort?.abort();
    for (const source of s.sources) {
      try {
        source.onended = null;
        source.stop();
      } catch {
        /* already stopped */
      }
    }
    s.sources.clear();
  }

  setStatus(jobId, s, status) {
    if (s.status === status) return;
    s.status = status;
    this.onChange(jobId, status);
  }
}
