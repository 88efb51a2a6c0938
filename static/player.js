// Gapless playback of segments as they arrive (Web Audio: Chromium, Firefox, Safari), and the
// helpers that make raw PCM playable in an <audio> element.

const GAP_S = 0.12; // the pause the worker puts between segments in the final file
const LEAD_S = 0.08; // scheduling head room

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
    this.jobs = new Map();
    this.onChange = onChange || (() => {});
  }

  /** Call from a user gesture: browsers only let audio start after one. */
  unlock() {
    const Ctx = window.AudioContext || window.webkitAudioContext;
    if (!Ctx) return false;
    if (!this.ctx) {
      try {
        this.ctx = new Ctx({ latencyHint: "playback" });
      } catch {
        return false;
      }
    }
    if (this.ctx.state === "suspended") this.ctx.resume().catch(() => {});
    return true;
  }

  has(jobId) {
    const s = this.jobs.get(jobId);
    return Boolean(s && !s.stopped);
  }

  start(jobId, { format, sampleRate = 24000, urlFor }) {
    if (!this.ctx) return;
    this.jobs.set(jobId, {
      format, sampleRate, urlFor,
      chain: Promise.resolve(), next: 1, nextTime: 0, firstStart: null,
      sources: new Set(), scheduled: 0, broken: false, stopped: false, finished: false,
      playedS: 0, status: "waiting",
    });
  }

  /** Segment `index` (1-based) of `total` is ready on the server. */
  segment(jobId, index, total) {
    const s = this.jobs.get(jobId);
    if (!s || s.stopped || s.broken || total < 2) return;
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
        this.schedule(jobId, s, buffer);
      })
      .catch(() => {
        if (s.stopped || s.broken) return;
        s.broken = true;
        s.playedS = this.playedSeconds(s);
        this.silence(s);
        this.setStatus(jobId, s, "broken");
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

  schedule(jobId, s, buffer) {
    const ctx = this.ctx;
    if (ctx.state === "suspended") ctx.resume().catch(() => {});
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    const at = Math.max(ctx.currentTime + LEAD_S, s.nextTime);
    source.start(at);
    if (s.firstStart === null) s.firstStart = at;
    s.nextTime = at + buffer.duration + GAP_S;
    s.scheduled += 1;
    s.sources.add(source);
    source.onended = () => {
      s.sources.delete(source);
      if (!s.sources.size && !s.stopped && !s.broken) {
        this.setStatus(jobId, s, s.finished && s.next > s.scheduled ? "ended" : "waiting");
      }
    };
    this.setStatus(jobId, s, "playing");
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
