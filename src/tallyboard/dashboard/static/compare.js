// The compare page: 2..50 runs overlaid per metric, one chart per split and metric on a chart board
// (board.js: grouped by split, searchable, pinnable, each chart loaded when first seen), grouping
// by an hparam, and the statistics panel (stats.js). The URL holds the whole view state, so a link
// reproduces exactly this view.
import * as TB from "./common.js";
import { ChartBoard, chartCard } from "./board.js";
import { Chart, tooLong } from "./charts.js";
import { bySplit, nameTooLong, splitGroup } from "./chart-names.js";
import { CHART_DEFAULTS, chartControls, chartSettings, stateSelect } from "./chart-settings.js";
import { live } from "./live.js";
import { aggregate } from "./series-math.js";
import { MetricSeries } from "./series.js";
import { statsPanel } from "./stats.js";

const { el } = TB;
const DEFAULTS = { runs: "", ...CHART_DEFAULTS, group: "", band: "minmax", reps: "mean" };
const state = TB.readState(DEFAULTS);
const main = document.getElementById("main");
const cards = new Map(); // metric -> Map(split -> {body, reset, chart})
let runs = [], hparamNames = [], board = null;
const legend = el("div", { class: "legend runs-legend", id: "runs-legend" });

document.getElementById("nav-compare").classList.add("active");
const save = (changes) => { Object.assign(state, changes); TB.writeState(state, DEFAULTS); };
const change = (changes) => { save(changes); redraw(); };
const runIds = state.runs.split(",").filter((s) => /^-?\d+$/.test(s)).map(Number);
// One request per metric serves its charts of every split, at the width of the first one.
const loaded = new MetricSeries(runIds, { draw, width: (entry) => cards.get(entry.metric).values().next().value.body.clientWidth });

async function start() {
  if (runIds.length < 1) {
    main.replaceChildren(el("div", { class: "empty-state" }, "Select 2 to 50 runs in the ", el("a", { href: "/" }, "runs table"), " to compare them."));
    return;
  }
  const page = await TB.getJSON(`/api/runs?ids=${runIds.join(",")}&limit=50&hidden=1`);
  runs = page.rows;
  // only the hparams these runs have: a table of several experiments has many more
  hparamNames = page.columns.filter((c) => c.kind === "hparam").map((c) => c.name).filter((n) => runs.some((r) => Object.hasOwn(r.cells, n)));
  runs.forEach((r, i) => { r.colour = r.color || TB.color(i); });
  nameRuns(runs, hparamNames);
  const details = await Promise.all(runs.map((r) => TB.getJSON(`/api/runs/${r.run_id}`)));
  const series = details.flatMap((d) => d.series);
  if (runs.some((r) => r.status === "running")) follow(new Map(runs.map((r) => [r.run_id, r.status])));
  const charts = new Map(series.map((s) => [`${s.split}\u0000${s.metric}`, s]));
  const ordered = [...charts.values()].sort((a, b) => bySplit(a.split, b.split) || (a.metric > b.metric) - (a.metric < b.metric));
  const bar = el("div", { class: "board-bar" });
  const sections = el("section", { id: "sections" }, bar);
  main.replaceChildren(el("div", { class: "layout" }, sidebar(), sections));
  board = new ChartBoard(sections, { toolbar: bar, grouped: true, page: "compare" });
  board.root.id = "charts";
  ordered.forEach((s) => addCard(s.split, s.metric));
  const results = page.columns.filter((c) => c.kind === "result").map((c) => c.name).filter((n) => runs.some((r) => Object.hasOwn(r.cells, n)));
  const tags = [...new Set(series.map((s) => s.tag))].sort();
  statsPanel(sections, { runIds, hparamNames, metrics: tags, results });
}

// A chart of one split and metric; its key (what search and pins see) is "split/metric".
function addCard(split, metric) {
  if (!cards.has(metric)) cards.set(metric, new Map());
  const entry = loaded.entry(metric);
  const card = { chart: null };
  card.reset = el("button", { hidden: true, onclick: () => loaded.load(entry, null) }, "Reset zoom");
  const png = el("button", { onclick: async () => TB.download(`compare_${split}_${metric}.png`, await card.chart.png(`${split}/${metric}`)) }, "PNG");
  card.body = chartCard(metric, { split }, card.reset, png);
  cards.get(metric).set(split, card);
  board.add(split ? `${split}/${metric}` : metric, splitGroup(split, metric), card.body, () => {
    if (nameTooLong(metric)) { png.disabled = true; card.body.append(tooLong(metric)); return; }
    card.chart = new Chart(card.body, { onZoom: (range) => loaded.load(entry, range) }); // zoom applies to every split
    if (entry.loaded) drawCard(entry, split, card);
    else if (!entry.pending) loaded.load(entry, null);
  });
}

// A run's name in legends: what sets it apart from the others compared (the hparams whose values
// differ, then its note or comment), so runs of a sweep that share a comment stay tellable apart.
function nameRuns(list, names) {
  const shown = (r, name) => (Object.hasOwn(r.cells, name) ? TB.format(TB.number(r.cells[name])) : "∅");
  const varying = names.filter((name) => new Set(list.map((r) => shown(r, name))).size > 1);
  for (const r of list) {
    const parts = varying.slice(0, 4).map((name) => `${name}=${shown(r, name)}`);
    const words = r.note || r.comment || "";
    r.label = [`#${r.run_id}`, ...parts, words].filter(Boolean).join(" ");
  }
}

// Grouped mode: one colour per value of the grouping hparam, the same in the sidebar and charts.
const groupKey = (r) => `${state.group}=${TB.format(TB.number(TB.cell(r, state.group))) || "∅"}`;
function groupColours() {
  const keys = [...new Set(runs.map(groupKey))].sort();
  return new Map(keys.map((key, i) => [key, TB.color(i)]));
}
const colourOf = (r, colours) => (state.group ? colours.get(groupKey(r)) : r.colour);

function drawLegend() {
  const colours = state.group ? groupColours() : null;
  legend.replaceChildren(...runs.map((r) => el("span", { dataset: { run: r.run_id, colour: colourOf(r, colours) } },
    TB.swatch(colourOf(r, colours)), el("a", { href: `/runs/${r.run_id}` }, `#${r.run_id}`),
    r.label.slice(String(r.run_id).length + 1), state.group ? el("span", { class: "muted group-key" }, `(${groupKey(r)})`) : null)));
}

function sidebar() {
  const hparams = [...hparamNames].sort();
  drawLegend();
  return el("aside", { class: "card side" },
    el("h3", {}, `${runs.length} runs`), legend,
    el("h3", {}, "Charts"),
    ...chartControls(state, change),
    el("label", {}, "Repetitions", stateSelect("reps", state, "reps", [["mean", "mean per run"], ["lines", "each a line"]], change)),
    el("label", {}, "Group by", stateSelect("group", state, "group", [["", "nothing (one line per run)"], ...hparams.map((h) => [h, h])], change)),
    el("label", {}, "Band", stateSelect("band", state, "band", [["minmax", "min – max"], ["std", "± std"], ["none", "none"]], change)));
}

function linesFor(entry, split) {
  const byId = new Map(runs.map((r) => [r.run_id, r]));
  const lines = entry.series.filter((s) => s.split === split).map((s) => {
    const r = byId.get(s.run_id);
    return { ...s, color: r.colour, run: r, label: r.label };
  });
  const bandMode = state.band === "std" ? "std" : "minmax";
  if (state.group) {
    const colours = groupColours();
    return aggregate(lines, (l) => groupKey(l.run), bandMode, entry.lo, entry.bucket)
      .map((l) => ({ ...l, color: colours.get(l.label), label: `${l.label} (${l.members} series)` }));
  }
  if (state.reps === "mean" && lines.some((l) => l.rep > 0)) {
    const colours = new Map(lines.map((l) => [l.run_id, l.color]));
    const labels = new Map(lines.map((l) => [l.run_id, l.label]));
    return aggregate(lines, (l) => l.run_id, bandMode, entry.lo, entry.bucket)
      .map((l) => ({ ...l, color: colours.get(l.run_id), label: labels.get(l.run_id) }));
  }
  return lines.map((l) => (l.rep > 0 ? { ...l, label: `${l.label} · rep ${l.rep}`, dash: [6, 3] } : l));
}

function drawCard(entry, split, card) {
  card.reset.hidden = !entry.range;
  card.body.dataset.range = entry.range ? entry.range.join("-") : "";
  card.chart.set(linesFor(entry, split), { ...chartSettings(state), bands: state.band !== "none", yTitle: entry.metric });
}

// Draws the charts of a metric that have been seen (the others draw when they are).
function draw(entry) {
  for (const [split, card] of cards.get(entry.metric)) if (card.chart) drawCard(entry, split, card);
}

function redraw() { drawLegend(); for (const entry of loaded.entries.values()) if (entry.loaded) draw(entry); }

// Live: the server pushes new points (live.js) into the loaded charts; a split or metric logged for
// the first time joins the board.
function follow(states) {
  loaded.ready = live({ runs: runIds.join(",") }, {
    update: (data) => {
      for (const fresh of data.series) {
        if (!cards.get(fresh.metric)?.has(fresh.split)) addCard(fresh.split, fresh.metric);
      }
      loaded.update(data.series);
    },
    reset: () => loaded.reload(),
    status: (runs) => {
      for (const run of runs) states.set(run.run_id, run.status);
      return [...states.values()].includes("running") ? "" : "all finished";
    },
  }).ready;
}

start();
