// A live session (GET /v1/live, WebSocket): one context's text sent as it is written, its audio
// and news handed to the caller as they come. No DOM here: this module only talks to the server.

/**
 * The handlers a session calls, all optional: opened(frame), audio(header, bytes: Uint8Array),
 * segment(frame), cleared(), done(frame), error({message, code}), closed(wasOver).
 */
export class LiveSession {
  constructor(handlers, context = "main") {
    this.handlers = handlers;
    this.context = context;
    this.header = null; // the audio frame whose binary frame comes next
    this.over = false;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(`${scheme}//${location.host}/v1/live`);
    this.ws.binaryType = "arraybuffer";
    this.ws.onmessage = (event) => this.receive(event.data);
    this.ws.onclose = (event) => this.closed(event);
    this.ready = new Promise((resolve) => {
      this.ws.onopen = () => resolve(true);
      this.ws.onerror = () => resolve(false);
    });
  }

  /** Open the context with `options` (voice, speed, seed, params). */
  async open(options) {
    if (!(await this.ready)) return false;
    return this.send({ op: "open", ...options });
  }

  text(piece) {
    return this.send({ op: "text", text: piece });
  }

  /** Barge-in: the server drops what is queued and answers "cleared". */
  clear() {
    return this.send({ op: "clear" });
  }

  /** No more text: the rest is spoken, then "done". */
  close() {
    return this.send({ op: "close" });
  }

  /** End the connection (nothing more to hear). */
  disconnect() {
    this.over = true;
    if (this.ws.readyState <= WebSocket.OPEN) this.ws.close(1000);
  }

  send(op) {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify({ context: this.context, ...op }));
    return true;
  }

  receive(data) {
    if (data instanceof ArrayBuffer) {
      const header = this.header;
      this.header = null;
      if (header) this.call("audio", header, new Uint8Array(data));
      return;
    }
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.context && frame.context !== this.context) return;
    switch (frame.type) {
      case "audio":
        this.header = frame;
        break;
      case "opened":
      case "segment":
        this.call(frame.type, frame);
        break;
      case "cleared":
        this.header = null;
        this.call("cleared");
        break;
      case "done":
        this.over = true;
        this.call("done", frame);
        this.disconnect();
        break;
      case "error":
        this.call("error", { message: frame.error?.message || "The live session failed.", code: frame.error?.code ?? null });
        break;
      default:
        break;
    }
  }

  closed(event) {
    const wasOver = this.over;
    this.over = true;
    if (!wasOver) {
      const why = event.code === 1008 ? "a limit of the server ended it" : "the connection was lost";
      this.call("error", { message: `The live session ended early: ${why}.`, code: `close_${event.code}` });
    }
    this.call("closed", wasOver);
  }

  call(name, ...args) {
    this.handlers[name]?.(...args);
  }
}
