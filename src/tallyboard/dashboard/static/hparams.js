// The hparams page: parallel coordinates (brush an axis to filter), a scatter with repetitions as
// error bars, the importance table (computed on the server) and the runs that pass the brushes.
// Plain SVG; user text enters only through textContent and attribute values.
import * as TB from "./common.js";
import { experimentScope, experimentSelect } from "./experiments.js";

const { el } = TB;
const DEFAULTS = { runs: "", filter: "", experiment: "", metric: "", summary: "final", k: "5", goal: "max", x: "", logx: "auto", logy: "auto", failed: "0" };
const state = TB.readState(DEFAULTS);
const main = document.getElementById("main");
const SVG = "http://www.w3.org/2000/svg";
const brushes = new Map(); // axis name -> [lo, hi] in axis units (numeric) or a Set of categories
let picker = null; // the experiment selector, when the page shows a filtered table of several
let runs = [], axes = [], values = new Map(), summaries = new Map(), metricNames = [], note = null;

document.getElementById("nav-hparams").classList.add("active");
const save = (changes) => { Object.assign(state, changes); TB.writeState(state, DEFAULTS); };

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) if (value !== null && value !== undefined) node.setAttribute(key, value);
  for (const child of children) if (child) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

async function start() {
  const ids = state.runs.split(",").filter((s) => /^-?\d+$/.test(s));
  let query = ids.length ? `ids=${ids.join(",")}&hidden=1` : `filter=${encodeURIComponent(state.filter)}`;
  if (!ids.length) { // the filtered table's runs: of one experiment when it holds several
    const { experiments, scope } = await experimentScope(state.experiment);
    if (scope !== null) query += `&experiment=${encodeURIComponent(scope)}`;
    picker = experimentSelect(experiments, scope, (value) => { save({ experiment: value }); location.reload(); });
  }
  const page = await TB.getJSON(`/api/runs?${query}&limit=1000`);
  const view = TB.viewRuns(page.rows, state.failed === "1");
  runs = view.shown;
  note = TB.viewNote(view.out, state.failed === "1", (on) => { save({ failed: on ? "1" : "0" }); location.reload(); });
  if (runs.length < 2) {
    main.replaceChildren(el("div", { class: "empty-state" }, "The hparams views need at least 2 runs: select them in the ", el("a", { href: "/" }, "runs table"), ".", note));
    return;
  }
  const hparams = page.columns.filter((c) => c.kind === "hparam").map((c) => c.name).filter((n) => runs.some((r) => Object.hasOwn(r.cells, n)));
  const results = page.columns.filter((c) => c.kind === "result").map((c) => c.name).filter((n) => runs.some((r) => Object.hasOwn(r.cells, n)));
  const named = await TB.getJSON(`/api/series/names?runs=${runs.slice(0, 50).map((r) => r.run_id).join(",")}`);
  const tags = named.tags.map((t) => t.tag);
  metricNames = [...results, ...tags.filter((t) => !results.includes(t))];
  if (!metricNames.includes(state.metric)) state.metric = metricNames[0] || "";
  // An axis where every run has the same value tells nothing: it is left out.
  const varies = (name) => new Set(runs.map((r) => JSON.stringify(TB.cell(r, name) ?? null))).size > 1;
  axes = [...hparams.filter(varies).map((name) => ({ name, kind: "hparam" })),
    ...results.filter((n) => n !== state.metric && varies(n)).map((name) => ({ name, kind: "result" }))];
  if (!state.x || ![...hparams, ...metricNames].includes(state.x)) state.x = hparams[0] || metricNames[0];
  await loadMetric();
}

async function loadMetric() {
  const query = new URLSearchParams({ runs: runs.map((r) => r.run_id).join(","), metric: state.metric,
    summary: state.summary, k: state.k, goal: state.goal });
  const [sums, importance] = await Promise.all([TB.getJSON(`/api/summaries?${query}`), TB.getJSON(`/api/importance?${query}`)]);
  summaries = new Map(sums.runs.map((s) => [s.run_id, s]));
  values = new Map(runs.map((r) => [r.run_id, valueOf(r, state.metric)]));
  axisScales.clear();
  brushes.delete(state.metric);
  render(importance);
}

// A run's number for a name: the chosen metric's summary (mean over repetitions), else its cell.
function valueOf(run, name) {
  if (name === state.metric) return summaries.has(run.run_id) ? TB.number(summaries.get(run.run_id).mean) : undefined;
  const v = TB.cell(run, name);
  return v === undefined ? undefined : TB.number(v);
}

// An axis maps values to [0, 1]: numbers linearly (or logarithmically when all are positive and
// span two decades), anything else as evenly spaced categories.
function scaleOf(name, forceLog, among = runs, pad = 0) {
  const vals = among.map((r) => valueOf(r, name)).filter((v) => v !== undefined && v !== null);
  const numeric = vals.length > 0 && vals.every((v) => typeof v === "number" && isFinite(v));
  if (!numeric) {
    const cats = [...new Set(vals.map((v) => TB.format(v)))].sort();
    return { categorical: true, cats, pos: (v) => (cats.length < 2 ? 0.5 : cats.indexOf(TB.format(v)) / (cats.length - 1)), ticks: cats.map((c, i) => [c, cats.length < 2 ? 0.5 : i / (cats.length - 1)]) };
  }
  let lo = Math.min(...vals), hi = Math.max(...vals);
  const log = forceLog === undefined ? lo > 0 && hi / lo >= 100 : forceLog && lo > 0;
  const f = log ? Math.log10 : (v) => v;
  if (lo === hi) { lo -= 1; hi += 1; }
  const margin = pad * (f(hi) - f(lo));
  const a = f(lo) - margin, b = f(hi) + margin;
  const pos = (v) => (f(v) - a) / (b - a || 1);
  const ticks = [lo, (log ? 10 ** ((a + b) / 2) : (lo + hi) / 2), hi].map((v) => [TB.format(+v.toPrecision(3)), pos(v)]);
  return { categorical: false, log, lo, hi, pos, ticks };
}

function colourFor(value, lo, hi) {
  if (value === undefined || !isFinite(value)) return "#4a5062";
  const t = hi > lo ? (value - lo) / (hi - lo) : 0.5; // dark blue -> cyan -> yellow
  const stops = [[94, 60, 170], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const x = Math.min(0.999, Math.max(0, t)) * (stops.length - 1), i = Math.floor(x), f = x - i;
  return `rgb(${stops[i].map((c, j) => Math.round(c + f * (stops[i + 1][j] - c))).join(",")})`;
}

const axisScales = new Map(); // the parallel axes' scales, shared by drawing and brushing
const axisScale = (name) => axisScales.get(name) || axisScales.set(name, scaleOf(name)).get(name);

function passes(run) {
  for (const [name, range] of brushes) {
    const v = valueOf(run, name);
    if (v === undefined) return false;
    const p = axisScale(name).pos(v);
    if (p < range[0] - 1e-9 || p > range[1] + 1e-9) return false;
  }
  return true;
}

function render(importance) {
  main.replaceChildren(el("div", { class: "layout" }, controls(), el("section", { id: "hp-sections" },
    el("div", { class: "card hp-card" }, el("div", { class: "block-head" }, el("strong", {}, "Parallel coordinates"),
      el("span", { class: "muted" }, "drag along an axis to brush; click an axis to clear")), el("div", { id: "parcoords" })),
    el("div", { class: "hp-row" },
      el("div", { class: "card hp-card" }, el("div", { class: "block-head" }, el("strong", {}, "Scatter"), scatterControls()), el("div", { id: "scatter" })),
      el("div", { class: "card hp-card" }, el("div", { class: "block-head" }, el("strong", {}, `Importance for ${state.metric}`),
        el("span", { class: "muted", id: "importance-count" }, importance.n === runs.length ? `${runs.length} runs`
          : `${importance.n} of the ${runs.length} runs have ${state.metric}`)), importanceTable(importance))),
    el("div", { class: "card hp-card" }, el("div", { class: "block-head" }, el("strong", { id: "kept-count" }, ""),
      el("span", {}, el("button", { id: "hp-compare", onclick: () => openWith("/compare") }, "Compare these"), " ",
        el("button", { id: "hp-diff", onclick: () => openWith("/diff") }, "Diff these"))),
    el("div", { class: "table-wrap" }, el("table", { class: "runs", id: "hp-runs" }))))));
  drawAll();
}

function openWith(path) { location.href = `${path}?runs=${runs.filter(passes).map((r) => r.run_id).slice(0, 50).join(",")}`; }

// A box's width inside its padding: what a plot drawn in it may take.
const inner = (box) => { const css = getComputedStyle(box); return box.clientWidth - parseFloat(css.paddingLeft) - parseFloat(css.paddingRight); };

function drawAll() { drawParcoords(); drawScatter(); drawTable(); }
// The plots are drawn at their box's width: a window made narrower or wider draws them again.
let drawnWidth = 0;
new ResizeObserver(TB.debounce(() => {
  const box = document.getElementById("parcoords");
  if (box && Math.abs(box.clientWidth - drawnWidth) > 2) { drawParcoords(); drawScatter(); }
}, 100)).observe(main);

function controls() {
  const select = (id, key, options, after) => el("select", { id, onchange: async (e) => { save({ [key]: e.target.value }); await (after || loadMetric)(); } },
    options.map(([v, t]) => el("option", { value: v, selected: state[key] === v }, t)));
  return el("aside", { class: "card side" },
    el("h3", { id: "hp-count" }, `${runs.length} runs`), note,
    picker ? el("label", {}, "Experiment", picker) : null,
    el("label", {}, "Result", select("hp-metric", "metric", metricNames.map((m) => [m, m]))),
    el("label", {}, "Summary", select("hp-summary", "summary", [["final", "final value"], ["best", "best value"], ["last_k", "mean of last k"]])),
    el("label", {}, "k", el("input", { type: "text", id: "hp-k", value: state.k, onchange: async (e) => { save({ k: e.target.value }); await loadMetric(); } })),
    el("label", {}, "Best is", select("hp-goal", "goal", [["max", "highest"], ["min", "lowest"]])),
    el("p", { class: "muted" }, "Lines are coloured by the result (dark: low, yellow: high). The summary of a scalar is taken per repetition and averaged per run."));
}

function drawParcoords() {
  const box = document.getElementById("parcoords");
  const names = [...axes.map((a) => a.name), state.metric];
  const width = Math.max(600, inner(box) || 900), height = 340, top = 34, bottom = 28, left = 60, right = 60;
  const step = names.length > 1 ? (width - left - right) / (names.length - 1) : 0;
  const scales = new Map(names.map((n) => [n, axisScale(n)]));
  const y = (p) => top + (1 - p) * (height - top - bottom);
  const metricScale = scales.get(state.metric);
  const root = svg("svg", { width, height, class: "parcoords", role: "img", "aria-label": "parallel coordinates" });
  const lines = svg("g", {});
  root.append(lines);
  for (const run of runs) {
    const pts = names.map((n, i) => { const v = valueOf(run, n); return v === undefined ? null : [left + i * step, y(scales.get(n).pos(v))]; });
    const d = pts.map((p, i) => (p ? `${i && pts[i - 1] ? "L" : "M"}${p[0].toFixed(1)},${p[1].toFixed(1)}` : "")).join("");
    const kept = passes(run);
    const path = svg("path", { d, class: kept ? "pc-line" : "pc-line dim", stroke: kept ? colourFor(values.get(run.run_id), metricScale.lo, metricScale.hi) : null, "data-run": run.run_id },
      svg("title", {}, `#${run.run_id} ${run.note || run.comment || ""}`));
    path.addEventListener("click", () => { location.href = `/runs/${run.run_id}`; });
    lines.append(path);
  }
  names.forEach((name, i) => {
    const x = left + i * step, scale = scales.get(name);
    const axis = svg("g", { class: "pc-axis", "data-axis": name });
    axis.append(svg("line", { x1: x, x2: x, y1: top, y2: height - bottom }));
    axis.append(svg("text", { x, y: top - 14, class: "pc-title" }, name.length > 24 ? `${name.slice(0, 23)}…` : name, svg("title", {}, name)));
    for (const [label, p] of scale.ticks) axis.append(svg("text", { x: x - 6, y: y(p) + 4, class: "pc-tick" }, label.length > 14 ? `${label.slice(0, 13)}…` : label));
    if (scale.log) axis.append(svg("text", { x, y: height - 8, class: "pc-tick pc-log" }, "log"));
    const range = brushes.get(name);
    if (range) axis.append(svg("rect", { x: x - 8, y: y(range[1]), width: 16, height: Math.max(2, y(range[0]) - y(range[1])), class: "pc-brush" }));
    const grab = svg("rect", { x: x - 14, y: top, width: 28, height: height - top - bottom, class: "pc-grab" });
    axis.append(grab);
    brushOn(grab, name, y, top, height - bottom);
    root.append(axis);
  });
  box.replaceChildren(root);
  drawnWidth = box.clientWidth;
  box.dataset.drawnWidth = drawnWidth; // what a script driving the page waits on: no redraw pending
}

// Drag along an axis sets its brush; a click without a drag clears it. While dragging only the
// brush and the lines' styles change: the axis under the pointer stays (it holds the capture).
function brushOn(grab, name, y, y0, y1) {
  grab.addEventListener("pointerdown", (e) => {
    const svgBox = grab.ownerSVGElement.getBoundingClientRect();
    const start = e.clientY - svgBox.top;
    const toP = (py) => Math.min(1, Math.max(0, 1 - (py - y0) / (y1 - y0)));
    grab.setPointerCapture(e.pointerId);
    let rect = grab.parentNode.querySelector(".pc-brush");
    const move = (m) => {
      const now = m.clientY - svgBox.top;
      if (Math.abs(now - start) < 3) return;
      const a = toP(start), b = toP(now);
      brushes.set(name, [Math.min(a, b), Math.max(a, b)]);
      if (!rect) { rect = svg("rect", { class: "pc-brush", width: 16 }); grab.before(rect); }
      const x = +grab.getAttribute("x") + 6;
      rect.setAttribute("x", x);
      rect.setAttribute("y", y(Math.max(a, b)));
      rect.setAttribute("height", Math.max(2, y(Math.min(a, b)) - y(Math.max(a, b))));
      restyle();
    };
    const up = (u) => {
      grab.removeEventListener("pointermove", move);
      if (Math.abs(u.clientY - svgBox.top - start) < 3) brushes.delete(name);
      drawAll();
    };
    grab.addEventListener("pointermove", move);
    grab.addEventListener("pointerup", up, { once: true });
  });
}

function restyle() {
  const scale = axisScale(state.metric);
  const byId = new Map(runs.map((r) => [r.run_id, r]));
  document.querySelectorAll("#parcoords path.pc-line").forEach((path) => {
    const run = byId.get(+path.dataset.run), kept = passes(run);
    path.classList.toggle("dim", !kept);
    if (kept) path.setAttribute("stroke", colourFor(values.get(run.run_id), scale.lo, scale.hi));
    else path.removeAttribute("stroke");
  });
  drawScatter();
  drawTable();
}

function scatterControls() {
  const choices = [...axes.filter((a) => a.kind === "hparam").map((a) => a.name), ...metricNames];
  return el("span", {}, el("select", { id: "hp-x", onchange: (e) => { save({ x: e.target.value }); drawScatter(); } },
    choices.map((c) => el("option", { value: c, selected: state.x === c }, c))), " ",
  el("label", { class: "chip" }, el("input", { type: "checkbox", id: "hp-logx", onchange: (e) => { save({ logx: e.target.checked ? "1" : "0" }); drawScatter(); } }), "log x"), " ",
  el("label", { class: "chip" }, el("input", { type: "checkbox", id: "hp-logy", onchange: (e) => { save({ logy: e.target.checked ? "1" : "0" }); drawScatter(); } }), "log y"));
}

const logChoice = (value) => (value === "auto" ? undefined : value === "1"); // auto: two decades, all positive

function drawScatter() {
  const box = document.getElementById("scatter");
  const width = Math.max(360, inner(box) || 520), height = 320, left = 64, right = 24, top = 30, bottom = 44;
  // Axes span the runs that have both numbers (brushing does not move them), with a margin.
  const plotted = runs.filter((r) => valueOf(r, state.x) !== undefined && isFinite(valueOf(r, state.metric)));
  const xs = scaleOf(state.x, logChoice(state.logx), plotted, 0.04);
  const ys = scaleOf(state.metric, logChoice(state.logy), plotted, 0.06);
  const points = plotted.filter(passes).map((r) => ({ run: r, x: valueOf(r, state.x), s: summaries.get(r.run_id) }));
  document.getElementById("hp-logx").checked = xs.log;
  document.getElementById("hp-logy").checked = ys.log;
  const spread = (p) => (isFinite(TB.number(p.s.std)) ? TB.number(p.s.std) : 0);
  const px = (v) => left + xs.pos(v) * (width - left - right);
  const py = (v) => top + (1 - ys.pos(v)) * (height - top - bottom);
  const root = svg("svg", { width, height, class: "scatter", role: "img", "aria-label": `scatter of ${state.metric} against ${state.x}` });
  root.append(svg("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom, class: "sc-axis" }),
    svg("line", { x1: left, x2: left, y1: top, y2: height - bottom, class: "sc-axis" }));
  for (const [label, p] of xs.ticks) root.append(svg("text", { x: left + p * (width - left - right), y: height - bottom + 16, class: "pc-tick sc-xt" }, label));
  for (const [label, p] of ys.ticks) root.append(svg("text", { x: left - 6, y: top + (1 - p) * (height - top - bottom) + 4, class: "pc-tick" }, label));
  root.append(svg("text", { x: (left + width) / 2, y: height - 6, class: "pc-title" }, state.x + (xs.log ? " (log)" : "")),
    svg("text", { x: 12, y: 16, class: "pc-title sc-yt" }, state.metric + (ys.log ? " (log)" : "")));
  const readout = el("div", { class: "readout", id: "hp-readout" }, "hover a point");
  for (const p of points) {
    const mean = TB.number(p.s.mean), sd = spread(p);
    const cx = px(p.x), cy = py(mean);
    const g = svg("g", { class: "sc-point", "data-run": p.run.run_id, "data-x": String(p.x), "data-y": String(mean), "data-n": p.s.n });
    if (sd > 0) {
      const lo = ys.log ? Math.max(mean - sd, ys.lo) : mean - sd;
      const clip = (v) => Math.min(height - bottom, Math.max(top, v)); // a bar never leaves the plot
      g.append(svg("line", { x1: cx, x2: cx, y1: clip(py(lo)), y2: clip(py(mean + sd)), class: "sc-err" }));
    }
    const text = `#${p.run.run_id} ${state.x}=${TB.format(p.x)} ${state.metric}=${TB.format(mean)}${p.s.n > 1 ? ` ± ${TB.format(sd)} (n=${p.s.n})` : ""}`;
    g.append(svg("circle", { cx, cy, r: 5, fill: colourFor(mean, ys.lo, ys.hi) }), svg("title", {}, text));
    g.addEventListener("mouseenter", () => { readout.textContent = text; });
    g.addEventListener("click", () => { location.href = `/runs/${p.run.run_id}`; });
    root.append(g);
  }
  box.replaceChildren(root, readout);
}

function importanceTable(importance) {
  const fmt = (v) => (v === null || v === undefined ? "—" : TB.format(+TB.number(v).toFixed(3)));
  const bar = (v) => { const b = el("i", { class: "imp-bar" }); b.style.width = `${Math.round(100 * Math.min(1, Math.abs(v || 0)))}%`; return b; };
  return el("table", { class: "runs stats", id: "importance" },
    el("thead", {}, el("tr", {}, ["hparam", "levels", "Spearman ρ", "p", "η² (ANOVA)", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, importance.rows.map((r) => el("tr", { dataset: { hparam: r.hparam } },
      el("td", {}, r.hparam), el("td", { class: "num" }, r.levels), el("td", { class: "num" }, fmt(r.spearman)),
      el("td", { class: "num" }, fmt(r.spearman_p)), el("td", { class: "num" }, fmt(r.eta_squared)), el("td", { class: "imp" }, bar(r.eta_squared))))));
}

function drawTable() {
  const kept = runs.filter(passes);
  document.getElementById("kept-count").textContent = `${kept.length} of ${runs.length} runs pass the brushes`;
  const names = [...axes.map((a) => a.name), state.metric];
  document.getElementById("hp-runs").replaceChildren(
    el("thead", {}, el("tr", {}, el("th", {}, "run"), names.map((n) => el("th", { title: n }, n)))),
    el("tbody", {}, kept.map((r) => el("tr", { dataset: { run: r.run_id }, onclick: () => { location.href = `/runs/${r.run_id}`; } },
      el("td", {}, `#${r.run_id}`), names.map((n) => { const v = valueOf(r, n); return el("td", { class: typeof v === "number" ? "num" : "" }, TB.format(v)); })))));
}

start().catch((e) => main.replaceChildren(el("div", { class: "empty-state error" }, e.message)));
