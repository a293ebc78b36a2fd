// The run page's account of how a failed run failed (runs.error, schema v13: an uncaught
// exception, a non-zero exit status, a signal): its type and message under the title, the
// traceback folded below them. Every part goes in as text, never as HTML.
import * as TB from "./common.js";

const { el } = TB;

// stored: the JSON text {"type", "message", "traceback"}, or null for a run that did not fail so.
export function failureCard(stored) {
  if (!stored) return null;
  let failure;
  try { failure = JSON.parse(stored); } catch (e) { failure = { type: "error", message: stored, traceback: "" }; }
  const head = el("div", { class: "failure-head" }, el("strong", {}, failure.type || "error"),
    failure.message ? `: ${failure.message}` : "");
  const trace = failure.traceback
    ? el("details", {}, el("summary", {}, "Traceback"), el("pre", { class: "block", id: "failure-traceback" }, failure.traceback))
    : null;
  return el("div", { class: "card failure", id: "run-failure", role: "alert" }, head, trace);
}
