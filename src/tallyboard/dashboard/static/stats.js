// The statistics panel of the compare page: groups (by one or more hparams) with n, mean, std and
// 95% CI of a metric summary, and every pair of groups tested (Welch, Holm) with a verdict in words.
// The numbers come from /api/compare (scipy on the server); this only lays them out.
import * as TB from "./common.js";

const { el } = TB;
const DEFAULTS = { runs: "", sm: "", by: "", summary: "final", k: "5", goal: "max", unit: "rep" };
const state = TB.readState(DEFAULTS);
// The compare page owns the URL too (and `runs`): write only this panel's keys.
function save() {
  const { runs, ...own } = state;
  TB.writeState(own, DEFAULTS);
}
const panel = el("div", { class: "card stats-panel", id: "stats" });
const out = el("div", { id: "stats-out" });

// Shows the panel at the top of `sections` for the compared runs, their hparams, the metrics they
// logged and the results they hold.
// `by` is the page's grouping, and `onGroup(names)` tells the page when it changes here: one
// "Group by" for the statistics and the charts.
export function statsPanel(sections, { runIds, hparamNames, metrics, results, by: grouping, onGroup }) {
  const choices = [...results, ...metrics.filter((m) => !results.includes(m))];
  if (!choices.includes(state.sm)) state.sm = choices[0] || "";
  const by = new Set(grouping);
  state.by = [...by].join(","); // as the page has it (an old link's `group=`)
  const select = (id, key, options) => el("select", { id, onchange: (e) => { state[key] = e.target.value; save(); load(); } },
    options.map(([v, t]) => el("option", { value: v, selected: state[key] === v }, t)));
  const boxes = [...hparamNames].sort().map((name) => el("label", { class: "chip" }, el("input", { type: "checkbox", checked: by.has(name), dataset: { by: name },
    onchange: (e) => { e.target.checked ? by.add(name) : by.delete(name); state.by = [...by].join(","); save(); onGroup([...by]); load(); } }), name));
  panel.replaceChildren(
    el("div", { class: "block-head" }, el("strong", {}, "Statistics of groups"), el("span", { class: "muted" }, "95% CIs (t), Welch's t-test, Holm-corrected across pairs")),
    el("div", { class: "toolbar stats-controls" },
      el("label", {}, "Metric ", select("stats-metric", "sm", choices.map((m) => [m, m]))),
      el("label", {}, "Summary ", select("stats-summary", "summary", [["final", "final value"], ["best", "best value"], ["last_k", "mean of last k"]])),
      el("label", {}, "k ", el("input", { type: "text", id: "stats-k", value: state.k, size: 3, onchange: (e) => { state.k = e.target.value; save(); load(); } })),
      el("label", {}, "Best is ", select("stats-goal", "goal", [["max", "highest"], ["min", "lowest"]])),
      el("label", {}, "Sample ", select("stats-unit", "unit", [["rep", "per repetition"], ["run", "per run"]])),
      el("span", { class: "muted" }, "Group by"), ...boxes),
    out);
  sections.prepend(panel);
  load();

  async function load() {
    const query = new URLSearchParams({ runs: runIds.join(","), metric: state.sm, summary: state.summary, k: state.k, goal: state.goal, unit: state.unit });
    for (const name of by) query.append("by", name);
    try { render(await TB.getJSON(`/api/compare?${query}`)); } catch (e) { out.replaceChildren(el("div", { class: "error" }, e.message)); }
  }
}

const num = (v) => { const x = TB.number(v); return typeof x === "number" && isFinite(x) ? TB.format(+x.toPrecision(4)) : "—"; };

function render(found) {
  const groups = el("table", { class: "runs stats", id: "stats-groups" },
    el("thead", {}, el("tr", {}, ["group", "n", "mean", "std", "95% CI", "runs"].map((h) => el("th", {}, h)))),
    el("tbody", {}, found.groups.map((g) => el("tr", { dataset: { group: g.label } },
      el("td", {}, g.label), el("td", { class: "num" }, g.n), el("td", { class: "num" }, num(g.mean)), el("td", { class: "num" }, num(g.std)),
      el("td", { class: "num" }, `[${num(g.ci_low)}, ${num(g.ci_high)}]`),
      el("td", {}, g.run_ids.flatMap((id, i) => [i ? " " : "", el("a", { href: `/runs/${id}` }, `#${id}`)]))))));
  const pairs = found.pairs.length ? el("table", { class: "runs stats", id: "stats-pairs" },
    el("thead", {}, el("tr", {}, ["B − A", "difference", "95% CI", "Welch p", "Holm p", "verdict"].map((h) => el("th", {}, h)))),
    el("tbody", {}, found.pairs.map((p) => el("tr", { class: p.p_holm < 0.05 ? "significant" : "" },
      el("td", {}, `${p.b} − ${p.a}`), el("td", { class: "num" }, num(p.diff)), el("td", { class: "num" }, `[${num(p.ci_low)}, ${num(p.ci_high)}]`),
      el("td", { class: "num" }, num(p.p)), el("td", { class: "num" }, num(p.p_holm)), el("td", { class: "verdict" }, p.verdict)))))
    : el("div", { class: "muted" }, "Group the runs by an hparam (each group needs 2 samples) to test the differences.");
  const unit = found.unit === "rep" ? "one sample per repetition" : "one sample per run (mean of its repetitions)";
  out.replaceChildren(el("div", { class: "muted stats-note" }, `${found.metric}: ${unit}`), groups, pairs);
}
