// How the page writes things for people: counts, durations, sizes, clock times (on the server's
// clock), excerpts, download names and voice labels. No state but the server clock offset.

export const nf = new Intl.NumberFormat();
export const countChars = (text) => [...text.replace(/\p{Cf}/gu, "")].length;
export const looksChinese = (text) => /[\u3400-\u9fff\uf900-\ufaff]/.test(text);

let skewS = 0; // server clock minus ours, only when clearly off

/** Job times are measured on the server's clock; adopt it only when ours is clearly off. */
export function adoptServerClock(serverNowS) {
  if (!Number.isFinite(serverNowS)) return;
  const off = serverNowS - Date.now() / 1000;
  if (Math.abs(off) > 3) skewS = off;
}

export const nowS = () => Date.now() / 1000 + skewS;

/** A time on the server's clock (epoch seconds) as a Date on ours. */
export const localDate = (epochS) => new Date((epochS - skewS) * 1000);

export function formatSeconds(s) {
  if (!Number.isFinite(s) || s < 0) s = 0;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.floor(s)} s`;
  const m = Math.floor(s / 60);
  const r = Math.floor(s % 60);
  if (m < 60) return `${m} min ${String(r).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

export function formatBytes(n) {
  if (!Number.isFinite(n)) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function formatClock(epochS) {
  if (!Number.isFinite(epochS)) return "";
  return localDate(epochS).toLocaleTimeString([], {
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

export function excerpt(text, n = 48) {
  const chars = [...text.replace(/\s+/g, " ").trim()];
  return chars.length > n ? `${chars.slice(0, n - 1).join("")}…` : chars.join("");
}

export function downloadName(rec) {
  const slug = [...(rec.text || "").normalize("NFKC").replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "")].slice(0, 32).join("").replace(/-+$/, "") || "speech";
  const ext = rec.params.format || "wav";
  return `${slug}-${rec.params.voice}-${rec.id.slice(0, 8)}.${ext}`;
}

// Voice names and languages, as the voice list (<select id="voice">) currently shows them.
const voiceOption = (name) => [...document.getElementById("voice").options]
  .find((o) => o.value === name);
export const voiceLanguage = (name) => voiceOption(name)?.dataset.language || "";
export const voiceLabel = (name) => voiceOption(name)?.textContent ?? name;
