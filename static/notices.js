// What the page tells a person outside the job cards: the screen-reader announcer (messages
// batched, none lost) and the form's error box with its "try again in N s" countdown.

const $ = (id) => document.getElementById(id);
const announcer = $("announcer");
const box = $("form-error");
const boxTitle = $("form-error-title");
const boxBody = $("form-error-body");
const boxRetry = $("form-error-retry");

let announceTimer = null;
const announceQueue = [];

export function announce(message) {
  announceQueue.push(message);
  if (announceTimer) return;
  const flush = () => {
    if (!announceQueue.length) {
      announceTimer = null;
      return;
    }
    announcer.textContent = announceQueue.splice(0).join(" ");
    announceTimer = setTimeout(flush, 700);
  };
  announcer.textContent = "";
  announceTimer = setTimeout(flush, 60);
}

let retryTimer = null;

/** Show an ApiError in the form's error box, or hide the box (null). */
export function showFormError(err) {
  clearInterval(retryTimer);
  if (!err) {
    box.hidden = true;
    boxTitle.textContent = "";
    boxBody.textContent = "";
    boxRetry.textContent = "";
    return;
  }
  boxTitle.textContent = err.title || "Something went wrong";
  boxBody.textContent = err.message || "Please try again.";
  box.dataset.kind = err.kind || "server";
  const waits = err.kind === "rate_limited" || err.kind === "unavailable";
  // The countdown is not a live region (a screen reader would hear it every second);
  // the end of the wait is announced once.
  const paint = (left) => {
    boxRetry.textContent = left > 0 ? `You can try again in ${left} s.` : "You can try again now.";
  };
  if (waits && Number.isFinite(err.retryAfter)) {
    const until = Date.now() + err.retryAfter * 1000;
    paint(err.retryAfter);
    retryTimer = setInterval(() => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      paint(left);
      if (left <= 0) {
        clearInterval(retryTimer);
        announce("You can try again now.");
      }
    }, 1000);
  } else {
    boxRetry.textContent = err.kind === "unavailable" ? "Please try again in a moment." : "";
  }
  box.hidden = false;
}
