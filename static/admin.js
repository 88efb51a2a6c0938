// The operators' console: signs in with an admin key, follows /admin/v1/live (the queue, the
// workers, the dead letters, once a second) and sends the actions. Text only goes in as text.

const main = document.getElementById("main");
const statusLine = document.getElementById("status");

function say(message) {
  statusLine.textContent = message;
}

async function call(method, path, body) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json() : null;
  if (!response.ok) {
    const message = data && data.error ? data.error.message : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return data;
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  row.append(td);
  return td;
}

function button(label, name, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "btn btn-secondary btn-sm";
  b.textContent = label;
  b.setAttribute("aria-label", name);
  b.addEventListener("click", onClick);
  return b;
}

// Local time as the command line prints it (2026-12-06 14:30:05), whatever the browser's locale.
function when(seconds) {
  if (!seconds) return "";
  const d = new Date(seconds * 1000);
  const two = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} `
    + `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

// A rate to read at a glance: three significant digits at most (0.12, 3.45, 12.3, 456).
function figure(value) {
  const x = Number(value);
  if (!Number.isFinite(x)) return String(value);
  return x >= 100 ? String(Math.round(x)) : x.toFixed(x >= 10 ? 1 : 2);
}

// What each table shows now: a refresh that brings the same rows changes nothing (no churn for
// a screen reader, no control replaced under a pointer).
const shown = new WeakMap();

function fill(table, rows, render) {
  const signature = JSON.stringify(rows);
  if (shown.get(table) === signature) return;
  shown.set(table, signature);
  const body = table.querySelector("tbody");
  // Keep the focused control's place: a live refresh must not steal a keyboard user's focus.
  const focused = document.activeElement && body.contains(document.activeElement)
    ? document.activeElement.getAttribute("aria-label") : null;
  body.replaceChildren(...rows.map((item) => {
    const tr = document.createElement("tr");
    render(tr, item);
    return tr;
  }));
  if (focused) {
    const again = [...body.querySelectorAll("button")].find((b) => b.getAttribute("aria-label") === focused);
    if (again) again.focus();
  }
}

async function act(label, method, path, body) {
  try {
    const result = await call(method, path, body);
    say(`${label}: done.`);
    refreshAudit();
    return result;
  } catch (error) {
    say(`${label}: ${error.message}`);
    return null;
  }
}

// -- the live view ---------------------------------------------------------------------------

function renderQueue(view) {
  const intake = document.getElementById("intake");
  if (view.paused) {
    intake.dataset.state = "paused";
    const why = view.paused.reason ? `: ${view.paused.reason}` : "";
    intake.textContent = `Intake paused by ${view.paused.by} at ${when(view.paused.at)}${why}. Submissions get 503 paused.`;
  } else {
    intake.dataset.state = "open";
    intake.textContent = "Accepting submissions.";
  }
  fill(document.getElementById("lanes"), Object.entries(view.lanes), (tr, [lane, l]) => {
    cell(tr, lane);
    cell(tr, l.jobs);
    cell(tr, l.clients);
    cell(tr, `${l.oldest_age_s} s`);
  });
  const c = view.counts;
  const rate = view.throughput["1m"];
  const figures = [
    ["Queued", c.queued], ["Running", c.running], ["Dead letters", c.dead_letters],
    ["Succeeded", c.succeeded], ["Failed", c.failed], ["Workers", view.workers_alive],
    ["Jobs/s (1 min)", figure(rate.jobs_per_s)], ["Audio s/s (1 min)", figure(rate.audio_s_per_s)],
  ];
  const counts = document.getElementById("counts");
  const signature = JSON.stringify(figures);
  if (shown.get(counts) === signature) return;
  shown.set(counts, signature);
  counts.replaceChildren(...figures.flatMap(([name, value]) => {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = String(value);
    dd.dataset.figure = name;
    return [dt, dd];
  }));
}

function renderLetters(letters) {
  // None: say so, and no bulk buttons that would act on nothing.
  document.getElementById("dlq-empty").hidden = letters.length > 0;
  document.getElementById("dlq-bulk").hidden = letters.length === 0;
  fill(document.getElementById("dlq"), letters, (tr, letter) => {
    tr.dataset.jobId = letter.id;
    cell(tr, letter.id);
    cell(tr, letter.reason);
    cell(tr, letter.last_worker);
    cell(tr, when(letter.dead_at));
    const actions = cell(tr, "");
    if (letter.requeueable) {
      actions.append(button("Requeue", `Requeue job ${letter.id}`, () =>
        act(`Requeue ${letter.id}`, "POST", `/admin/v1/dlq/${letter.id}/requeue`)));
    }
    actions.append(button("Purge", `Purge the dead letter of job ${letter.id}`, () =>
      act(`Purge ${letter.id}`, "POST", "/admin/v1/dlq/purge", { ids: [letter.id] })));
  });
}

function renderWorkers(workers) {
  fill(document.getElementById("workers"), workers, (tr, w) => {
    tr.dataset.worker = w.name;
    cell(tr, `${w.name} (${w.host})`);
    cell(tr, `${w.engine} ${w.model_version || ""}`);
    cell(tr, w.device);
    cell(tr, w.state);
    cell(tr, w.in_hand);
    cell(tr, w.steps_per_s);
    cell(tr, `${w.streams.playing ?? "-"} / ${w.streams.capacity ?? "-"}`);
    const actions = cell(tr, "");
    if (w.state === "ready") {
      actions.append(button("Drain", `Drain worker ${w.name}`, () =>
        act(`Drain ${w.name}`, "POST", `/admin/v1/workers/${encodeURIComponent(w.name)}/drain`)));
    }
  });
}

function share(part, whole) {
  return whole ? `${part} (${Math.round((100 * part) / whole)}%)` : `${part}`;
}

function renderQuality(rows) {
  fill(document.getElementById("quality"), rows || [], (tr, q) => {
    cell(tr, q.engine);
    cell(tr, q.voice);
    cell(tr, q.heard);
    cell(tr, share(q.passed, q.heard));
    cell(tr, share(q.remade, q.heard));
    cell(tr, share(q.failed, q.heard));
    cell(tr, share(q.unheard, q.heard));
    cell(tr, Object.entries(q.reasons).map(([reason, n]) => `${reason} ${n}`).join(", ") || "-");
  });
}

function follow() {
  const source = new EventSource("/admin/v1/live");
  source.addEventListener("console", (message) => {
    const view = JSON.parse(message.data);
    if (view.error) {
      say(view.error);
      return;
    }
    main.dataset.live = "yes";
    renderQueue(view.queue);
    renderWorkers(view.workers);
    renderQuality(view.quality);
    renderLetters(view.dead_letters);
  });
  source.addEventListener("error", () => { main.dataset.live = "no"; });
}

// -- on demand -------------------------------------------------------------------------------

async function refreshAudit() {
  const data = await call("GET", "/admin/v1/audit?limit=20").catch(() => null);
  if (!data) return;
  fill(document.getElementById("audit"), data.audit, (tr, entry) => {
    cell(tr, when(entry.ts));
    cell(tr, entry.by);
    cell(tr, entry.action);
    cell(tr, entry.target);
    cell(tr, entry.detail || "");
  });
}

async function refreshUsage() {
  const data = await call("GET", "/admin/v1/usage?days=7").catch(() => null);
  if (!data) return;
  fill(document.getElementById("usage"), data.usage, (tr, row) => {
    cell(tr, row.day);
    cell(tr, `${row.label} ${row.client}`);
    cell(tr, row.jobs);
    cell(tr, row.succeeded);
    cell(tr, row.characters);
    cell(tr, row.audio_seconds);
  });
}

async function showRecord(jobId) {
  const data = await call("GET", `/admin/v1/jobs/${jobId}`).catch((error) => {
    say(error.message);
    return null;
  });
  if (!data) return;
  const record = document.getElementById("record");
  document.getElementById("record-title").textContent = `Job ${jobId}`;
  document.getElementById("record-body").textContent = JSON.stringify(data, null, 2);
  record.hidden = false;
  document.getElementById("record-body").focus();
}

async function search(form) {
  const query = new URLSearchParams();
  for (const [name, value] of new FormData(form)) if (value) query.set(name, value);
  query.set("limit", "50");
  const data = await call("GET", `/admin/v1/jobs?${query}`).catch((error) => {
    say(error.message);
    return null;
  });
  if (!data) return;
  say(`${data.jobs.length} jobs found.`);
  fill(document.getElementById("jobs"), data.jobs, (tr, job) => {
    const first = cell(tr, "");
    first.append(button(job.id, `Show job ${job.id}`, () => showRecord(job.id)));
    first.firstChild.className = "btn btn-ghost btn-sm mono";
    cell(tr, job.state);
    cell(tr, job.client);
    cell(tr, job.voice);
    cell(tr, job.text);
    cell(tr, when(job.created_at));
    cell(tr, job.attempts);
    cell(tr, job.error);
  });
}

function wire() {
  document.getElementById("sign-out").addEventListener("click", async () => {
    await call("DELETE", "/admin/session").catch(() => null);
    location.reload();
  });
  document.getElementById("pause-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const reason = document.getElementById("pause-reason").value;
    act("Pause intake", "POST", "/admin/v1/queue/pause", { reason });
  });
  document.getElementById("resume").addEventListener("click", () =>
    act("Resume intake", "POST", "/admin/v1/queue/resume"));
  document.getElementById("requeue-all").addEventListener("click", () =>
    act("Requeue all", "POST", "/admin/v1/dlq/requeue", { all: true }));
  document.getElementById("purge-all").addEventListener("click", () => {
    if (confirm("Remove every dead letter? The jobs themselves expire as usual.")) {
      act("Purge all", "POST", "/admin/v1/dlq/purge", { all: true });
    }
  });
  document.getElementById("search").addEventListener("submit", (event) => {
    event.preventDefault();
    search(event.target);
  });
  follow();
  refreshAudit();
  refreshUsage();
}

const signIn = document.getElementById("sign-in");
if (signIn) {
  signIn.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await call("POST", "/admin/session", { key: document.getElementById("admin-key").value });
      location.reload();
    } catch (error) {
      say(`Sign in: ${error.message}`);
    }
  });
} else if (main.dataset.signedIn === "yes") {
  wire();
}
