// Alerts (docs/alerts.md): a run's list above its tabs, and a marker on the runs table's row of
// each run that has any. Kept here so that run.js and table.js only call in (two lines each).
import { el, getJSON, time } from "./common.js";

const LEVELS = ["info", "warn", "error"];
const level = (name) => (LEVELS.includes(name) ? name : "info");

// The run page's alerts, newest first; hidden while there are none. `refresh()` reloads them
// (the live stream says when a text of kind 'alert' was written).
export function runAlerts(runId) {
  const box = el("section", { class: "card alerts", id: "alerts", hidden: true });
  const refresh = async () => {
    const { alerts } = await getJSON(`/api/runs/${runId}/alerts`);
    box.hidden = !alerts.length;
    box.replaceChildren(el("h3", {}, `Alerts (${alerts.length})`), el("ul", {}, alerts.slice().reverse().map(item)));
  };
  refresh().catch(() => { box.hidden = true; }); // no list rather than a broken page
  return { element: box, refresh };
}

function item(alert) {
  const where = [`step ${alert.step}`, time(alert.time), alert.rule].filter(Boolean).join(" · ");
  return el("li", { class: `alert ${level(alert.level)}` },
    el("span", { class: "alert-level" }, level(alert.level)), " ", el("strong", {}, alert.title),
    alert.stop ? el("span", { class: "alert-stop" }, "asked the run to stop") : null,
    alert.text ? el("div", { class: "alert-text" }, alert.text) : null,
    el("div", { class: "muted" }, where));
}

// Marks the rows (`tbody tr[data-run]`) of `table` whose run has alerts: after each render, and
// with `reload` when the stream says new alerts were written.
let marks = null;
export async function markRuns(table, reload = false) {
  if (!marks || reload) marks = await getJSON("/api/alerts").then((r) => r.runs, () => marks || {});
  table.querySelectorAll("tbody tr[data-run]").forEach((tr) => {
    tr.querySelector(".alert-mark")?.remove();
    const mark = Object.hasOwn(marks, tr.dataset.run) ? marks[tr.dataset.run] : null;
    if (!mark) return;
    const words = `${mark.count} alert${mark.count === 1 ? "" : "s"}, latest: ${mark.latest.title}`;
    tr.firstChild.append(el("a", { class: `alert-mark ${level(mark.level)}`, href: `/runs/${tr.dataset.run}`,
      title: words, "aria-label": words, onclick: (e) => e.stopPropagation() }, "!"));
  });
}
