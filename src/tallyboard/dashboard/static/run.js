// The run page: info with autosave, charts per metric (live, zoomable), media, texts, config, git.
import * as TB from "./common.js";
import { runAlerts } from "./alerts.js";
import { ChartBoard, chartCard } from "./board.js";
import { Chart, tooLong } from "./charts.js";
import { chartGroup, nameTooLong, GROUP_MIN } from "./chart-names.js";
import { CHART_DEFAULTS, chartControls, chartSettings, stateSelect } from "./chart-settings.js";
import { show as showHistograms } from "./histograms.js";
import { following, live } from "./live.js";
import { failureCard } from "./run-failure.js";
import { runTabs } from "./run-logs.js";
import { tableTabs } from "./run-tables.js";
import { aggregate } from "./series-math.js";
import { MetricSeries } from "./series.js";

const { el } = TB;
const runId = Number(location.pathname.split("/").pop()); // the server routes only integers here
const DEFAULTS = { tab: "scalars", ...CHART_DEFAULTS, reps: "minmax" };
const state = TB.readState(DEFAULTS);
const main = document.getElementById("main");
let run = null, alerts = null;

const settings = () => ({ ...chartSettings(state), bands: state.reps !== "mean" });
const save = (changes) => { Object.assign(state, changes); TB.writeState(state, DEFAULTS); };
const change = (changes) => { save(changes); redraw(); };

async function start() {
  if (!Number.isSafeInteger(runId)) {
    main.replaceChildren(el("div", { class: "empty-state" }, "no such run: run ids are integers")); return;
  }
  try { run = await TB.getJSON(`/api/runs/${runId}`); } catch (e) {
    main.replaceChildren(el("div", { class: "empty-state" }, e.message)); return;
  }
  document.title = `Run ${runId} · tallyboard`;
  alerts = runAlerts(runId);
  // The sidebar's form controls are most of the page's first layout: they are built once the
  // first frame is out, so it shows the first chart without them (its column is fixed: app.css).
  const side = el("aside", { class: "card side" });
  main.replaceChildren(el("div", { class: "layout" }, side, el("section", {}, title(), failureCard(run.error), alerts.element, tabs())));
  requestAnimationFrame(() => setTimeout(() => side.replaceWith(sidebar())));
  if (run.status === "running") follow();
  showTab(state.tab);
}

function title() {
  const duration = (run.end_time || run.now) - run.start_time;
  return el("div", { class: "run-title" }, TB.swatch(run.color || TB.color(0)),
    el("h1", {}, `Run ${run.run_id}`), el("span", { class: "muted" }, run.experiment),
    TB.statusBadge(run.status), el("span", { class: "muted" }, TB.duration(duration)),
    el("span", { class: "spacer" }), el("span", { class: "muted" }, `started ${TB.time(run.start_time)}`));
}

// Sidebar: run info (autosaved) and chart settings (kept in the URL).
function sidebar() {
  const saved = el("div", { class: "saved", id: "saved" });
  const autosave = TB.debounce(async (changes) => {
    try { await TB.postJSON(`/api/runs/${runId}`, changes); saved.textContent = "saved"; }
    catch (e) { saved.textContent = e.message; }
    setTimeout(() => { saved.textContent = ""; }, 1500);
  }, 500);
  const off = TB.readOnly;
  const status = el("select", { id: "status", disabled: off, onchange: (e) => autosave({ status: e.target.value }) },
    ["running", "finished", "failed"].map((s) => el("option", { value: s, selected: s === run.status }, s)));
  const tags = el("datalist", { id: "tag-options" });
  TB.getJSON("/api/tags").then((r) => tags.replaceChildren(...r.tags.map((t) => el("option", { value: t }))));
  const tag = el("input", { type: "text", id: "tag", value: run.tag, list: "tag-options", disabled: off,
    oninput: (e) => autosave({ tag: e.target.value }) });
  const colour = el("input", { type: "color", id: "colour", value: run.color || "#5b9cff", disabled: off,
    onchange: (e) => autosave({ color: e.target.value }) });
  const note = el("textarea", { id: "note", disabled: off, placeholder: "notes…", oninput: (e) => autosave({ note: e.target.value }) });
  note.value = run.note;
  const hidden = el("input", { type: "checkbox", id: "hidden", checked: run.hidden, disabled: off,
    onchange: (e) => autosave({ hidden: e.target.checked }) });
  const reps = stateSelect("reps", state, "reps",
    [["lines", "each a line"], ["minmax", "mean + min/max"], ["std", "mean ± std"], ["mean", "mean, no band"]], change);
  return el("aside", { class: "card side" },
    el("div", {}, el("h3", {}, "Run info"), saved),
    el("label", {}, "Status", status), el("label", {}, "Tag", tag, tags), el("label", {}, "Colour", colour),
    el("label", {}, "Hidden", hidden), note, run.note_html ? markdown(run.note_html) : null,
    el("h3", {}, "Charts"),
    ...chartControls(state, change),
    run.repetitions.length > 1 ? el("label", {}, "Repetitions", reps) : null);
}

const EXTRA_TABS = [...tableTabs, ...runTabs];
const TABS = [["scalars", "Scalars"], ["image", "Images"], ["figure", "Figures"], ["text", "Text"],
  ["fragment", "Fragments"], ["histogram", "Histograms"], ["hparams", "HParams"], ["config", "Config"],
  ["reproduce", "Reproduce"], ["artifacts", "Artifacts"]].concat(EXTRA_TABS.map(([k, label]) => [k, label]));
let tabBody = null;
function tabs() {
  tabBody = el("div", { id: "tab-body" });
  const bar = el("div", { class: "tabs" }, TABS.map(([key, label]) =>
    el("button", { dataset: { tab: key }, onclick: () => showTab(key) }, label)));
  return el("div", {}, bar, tabBody);
}

function showTab(key) {
  if (!TABS.some(([k]) => k === key)) key = "scalars";
  save({ tab: key });
  document.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("active", b.dataset.tab === key));
  board = null;
  document.querySelectorAll(".board-tools").forEach((tools) => tools.remove());
  const render = { scalars, image: gallery, figure: gallery, text: texts, fragment: fragments,
    histogram: () => showHistograms(tabBody, runId), hparams, config, reproduce, artifacts }[key];
  tabBody.replaceChildren();
  const extra = EXTRA_TABS.find(([k]) => k === key); // run-logs.js
  if (extra) extra[2](tabBody, { runId, get run() { return run; } }); else render(key);
}

// -- scalars -----------------------------------------------------------------------------
// Cards live on a board (board.js): grouped, searchable, pinnable, each loaded when first seen;
// their series are a MetricSeries (series.js), the same loading and live growth as on Compare.
let board = null, cards = new Map(), loaded = null; // the scalars tab's board, metric -> card, series
let streaming = Promise.resolve(); // the live stream's `ready`: charts load once it follows the run
function scalars() {
  const metrics = [...new Set(run.series.map((s) => s.metric))];
  if (!metrics.length) { tabBody.append(el("div", { class: "empty-state" }, "no scalars logged yet")); return; }
  board = new ChartBoard(tabBody, { toolbar: document.querySelector(".tabs"), grouped: metrics.length >= GROUP_MIN });
  board.root.id = "charts";
  const mine = new Map(); // a new tab's cards and series: a request of the tab before draws nothing here
  cards = mine;
  loaded = new MetricSeries([runId], { draw: (entry) => draw(mine.get(entry.metric), entry), width: (entry) => mine.get(entry.metric).body.clientWidth });
  loaded.ready = streaming;
  loaded.settled = run.status !== "running" || !following; // follow() streams only a running run's points
  metrics.forEach(addCard);
  board.showInView();
}

function addCard(metric) {
  const reset = el("button", { hidden: true, onclick: () => loaded.load(entry, null) }, "Reset zoom");
  const mine = run.series.filter((s) => s.metric === metric);
  const tags = [...new Set(mine.map((s) => s.tag))];
  const csv = el("select", { title: "download the full-resolution series as CSV", onchange: (e) => {
    if (e.target.value) location.href = `/api/runs/${runId}/scalars.csv?tag=${encodeURIComponent(e.target.value)}`;
    e.target.value = "";
  } }, el("option", { value: "" }, "CSV"), tags.map((t) => el("option", { value: t }, t)));
  const png = el("button", { onclick: async () => TB.download(`run${runId}_${TB.fileName(metric)}.png`, await card.chart.png(`Run ${runId} · ${metric}`)) }, "PNG");
  const body = chartCard(metric, {}, reset, csv, png);
  const entry = loaded.entry(metric);
  const card = { body, reset, chart: null };
  cards.set(metric, card);
  board.add(metric, chartGroup(metric, mine.map((s) => s.split)), body, () => {
    if (nameTooLong(metric)) {
      csv.disabled = true; png.disabled = true;
      body.append(tooLong(metric));
      return;
    }
    card.chart = new Chart(body, { onZoom: (range) => loaded.load(entry, range) });
    loaded.load(entry, null);
  });
}

function draw(card, entry) {
  if (!card || !card.chart) return;
  card.reset.hidden = !entry.range;
  card.body.dataset.range = entry.range ? entry.range.join("-") : "";
  const splits = [...new Set(entry.series.map((s) => s.split))];
  const manyReps = new Set(entry.series.map((s) => s.rep)).size > 1;
  let lines = entry.series.map((s) => ({ ...s, key: `${s.tag_id}:${s.rep}`, color: TB.color(splits.indexOf(s.split)),
    label: (s.split || s.metric) + (manyReps ? ` · rep ${s.rep}` : ""), dash: manyReps && s.rep % 2 ? [6, 3] : undefined }));
  if (manyReps && state.reps !== "lines") {
    lines = aggregate(lines, (l) => l.split || l.metric, state.reps === "std" ? "std" : "minmax", entry.lo, entry.bucket)
      .map((l) => ({ ...l, dash: undefined, label: `${l.label} (mean of ${l.members})` }));
  }
  card.chart.set(lines, { ...settings(), yTitle: entry.metric });
}

function redraw() { if (loaded) for (const entry of loaded.entries.values()) if (entry.loaded) draw(cards.get(entry.metric), entry); }

// Live: the server pushes what is new (live.js); charts not yet seen ignore it (they load fresh).
function follow() {
  streaming = live({ runs: runId }, {
    update: (data) => {
      if (state.tab === "scalars") liveScalars(data.series);
      const kinds = [...data.media, ...data.texts].map((item) => item.kind);
      if (kinds.includes("alert")) alerts.refresh();
      if (kinds.includes(state.tab)) showTab(state.tab);
    },
    reset: () => { if (state.tab === "scalars" && loaded) loaded.reload(); },
    status: (runs) => {
      const mine = runs.find((r) => r.run_id === runId);
      return mine && mine.status !== "running" ? mine.status : "";
    },
  }).ready;
}

async function liveScalars(fresh) {
  const unknown = loaded ? loaded.update(fresh) : fresh;
  if (!unknown.length) return;
  // A metric logged for the first time: its card joins the board.
  run = await TB.getJSON(`/api/runs/${runId}`);
  if (!board) { showTab("scalars"); return; }
  [...new Set(unknown.map((f) => f.metric))].filter((m) => !cards.has(m)).forEach(addCard);
}

// -- media ---------------------------------------------------------------------------------
async function gallery(kind) {
  const { media } = await TB.getJSON(`/api/runs/${runId}/media?kind=${kind}`);
  if (!media.length) { tabBody.append(el("div", { class: "empty-state" }, `no ${kind}s logged`)); return; }
  const pick = (name) => [...new Set(media.map((m) => m[name]))].sort((a, b) => (a > b) - (a < b));
  const select = (id, values, label) => el("select", { id }, el("option", { value: "" }, `all ${label}`),
    values.map((v) => el("option", { value: String(v) }, `${label} ${v}`)));
  const tagSel = select("media-tag", pick("tag"), "tags"), repSel = select("media-rep", pick("rep"), "rep");
  const epochSel = select("media-epoch", pick("epoch").filter((e) => e !== null), "epoch");
  const steps = pick("step");
  const slider = el("input", { type: "range", min: 0, max: steps.length, value: steps.length, id: "step-slider" });
  const stepLabel = el("span", { class: "muted" });
  const grid = el("div", { class: "gallery", id: "gallery" });
  const redrawGallery = () => {
    const step = Number(slider.value) < steps.length ? steps[Number(slider.value)] : null;
    stepLabel.textContent = step === null ? "all steps" : `step ${step}`;
    const shown = media.filter((m) => (!tagSel.value || m.tag === tagSel.value) && (!repSel.value || String(m.rep) === repSel.value)
      && (!epochSel.value || String(m.epoch) === epochSel.value) && (step === null || m.step === step));
    grid.replaceChildren(...shown.map((m) => el("figure", { class: "card", onclick: () => viewer(m) },
      el("img", { src: `/api/media/${m.media_id}`, alt: m.tag, loading: "lazy" }),
      el("figcaption", {}, `${m.tag} · step ${m.step}${m.epoch !== null ? ` · epoch ${m.epoch}` : ""} · rep ${m.rep}`))));
  };
  [tagSel, repSel, epochSel, slider].forEach((n) => n.addEventListener("input", redrawGallery));
  tabBody.append(el("div", { class: "toolbar" }, tagSel, repSel, epochSel, el("span", { class: "slider" }, "step", slider, stepLabel)), grid);
  redrawGallery();
}

function viewer(m) {
  const img = el("img", { src: `/api/media/${m.media_id}`, alt: m.tag });
  let scale = 1, x = 0, y = 0, drag = null;
  const apply = () => { img.style.transform = `translate(${x}px, ${y}px) scale(${scale})`; };
  const box = el("div", { class: "viewer", id: "viewer", title: "wheel: zoom · drag: pan · click outside/Esc: close" }, img,
    el("div", { class: "caption chip" }, `${m.tag} · step ${m.step} · ${m.width}×${m.height}px`));
  img.addEventListener("load", () => {
    scale = Math.min((innerWidth * 0.9) / img.naturalWidth, (innerHeight * 0.85) / img.naturalHeight);
    x = (innerWidth - img.naturalWidth * scale) / 2; y = (innerHeight - img.naturalHeight * scale) / 2; apply();
    img.style.position = "absolute"; img.style.left = "0"; img.style.top = "0";
  });
  box.addEventListener("wheel", (e) => {
    e.preventDefault();
    const factor = e.deltaY < 0 ? 1.2 : 1 / 1.2;
    x = e.clientX - (e.clientX - x) * factor; y = e.clientY - (e.clientY - y) * factor; scale *= factor; apply();
  }, { passive: false });
  box.addEventListener("mousedown", (e) => { drag = { x: e.clientX - x, y: e.clientY - y, moved: false }; });
  box.addEventListener("mousemove", (e) => { if (drag) { x = e.clientX - drag.x; y = e.clientY - drag.y; drag.moved = true; apply(); } });
  box.addEventListener("mouseup", (e) => { if (drag && !drag.moved && e.target === box) close(); drag = null; });
  const close = () => { box.remove(); removeEventListener("keydown", onKey); };
  const onKey = (e) => { if (e.key === "Escape") close(); };
  addEventListener("keydown", onKey);
  document.body.append(box);
}

// -- texts ---------------------------------------------------------------------------------
const meta = (t) => el("div", { class: "meta" }, `${t.tag} · step ${t.step}${t.epoch !== null ? ` · epoch ${t.epoch}` : ""} · rep ${t.rep}`);

async function texts() {
  const { texts: items } = await TB.getJSON(`/api/runs/${runId}/texts?kind=text`);
  if (!items.length) { tabBody.append(el("div", { class: "empty-state" }, "no text logged")); return; }
  tabBody.append(...items.map((t) => el("div", { class: "card item" }, meta(t), t.html !== null ? markdown(t.html) : el("pre", { class: "mono" }, t.content))));
}

// Markdown the server rendered and sanitised (markdown-it-py + nh3): the only HTML put in the page.
function markdown(html) {
  const box = el("div", { class: "markdown" });
  box.innerHTML = html;
  return box;
}

// Logged HTML runs only inside a sandboxed iframe without same-origin, under its own CSP.
async function fragments() {
  const { texts: items } = await TB.getJSON(`/api/runs/${runId}/texts?kind=fragment`);
  if (!items.length) { tabBody.append(el("div", { class: "empty-state" }, "no HTML fragments logged")); return; }
  tabBody.append(...items.map((t) => el("div", { class: "card item" }, meta(t),
    el("iframe", { class: "fragment", sandbox: "allow-scripts", src: `/fragments/${t.text_id}`, title: t.tag }))));
}

// -- files kept with the run: names are text, each a download link (never opened inline) --------
async function artifacts() {
  const { artifacts: items } = await TB.getJSON(`/api/runs/${runId}/artifacts`);
  if (!items.length) { tabBody.append(el("div", { class: "empty-state" }, "no artifacts logged")); return; }
  const href = (a) => `/api/runs/${runId}/artifacts/${a.name.split("/").map(encodeURIComponent).join("/")}`;
  const head = ["name", "kind", "bytes", "step", "sha256", "logged"].map((h) => el("th", {}, h));
  const rows = items.map((a) => el("tr", {},
    el("td", {}, el("a", { href: href(a), download: a.name.split("/").pop(), class: "artifact" }, a.name)),
    el("td", {}, a.kind), el("td", { class: "mono" }, String(a.size)),
    el("td", { class: "mono" }, a.step === null ? "" : String(a.step)),
    el("td", { class: "mono", title: a.sha256 }, a.sha256.slice(0, 12)),
    el("td", {}, TB.time(a.logged_at))));
  tabBody.append(el("div", { class: "card" }, el("table", { id: "artifacts" }, el("thead", {}, el("tr", {}, head)), el("tbody", {}, rows))));
}

// -- hparams, config, reproduce --------------------------------------------------------------
function kvCard(titleText, object) {
  const entries = Object.entries(object || {});
  return el("div", { class: "card" }, el("div", { class: "block-head" }, el("strong", {}, titleText)),
    entries.length ? el("div", { class: "kv" }, entries.flatMap(([k, v]) => [el("span", { class: "k" }, k), el("span", { class: "mono" }, TB.format(TB.number(v)))]))
      : el("div", { class: "empty-state" }, "none"));
}

function hparams() {
  tabBody.append(el("div", { class: "charts" }, kvCard("Hyperparameters", run.hparams), kvCard("Results", run.results)));
}

function codeBlock(titleText, text, id, lineClass) {
  const pre = el("pre", { class: "block", id });
  if (!text) pre.append(el("span", { class: "muted" }, "not captured"));
  else if (!lineClass) pre.textContent = text;
  else text.split("\n").forEach((line) => pre.append(el("span", { class: lineClass(line) }, line), "\n"));
  const copy = el("button", { disabled: !text, onclick: async () => {
    try { await navigator.clipboard.writeText(text); copy.textContent = "copied"; }
    catch (e) { getSelection().selectAllChildren(pre); copy.textContent = "press Ctrl+C"; }
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  } }, "Copy");
  return el("div", { class: "card" }, el("div", { class: "block-head" }, el("strong", {}, titleText), copy), pre);
}

function config() {
  tabBody.append(el("div", { class: "kv card" }, el("span", { class: "k" }, "path"), el("span", { class: "mono" }, run.config_path || "—"),
    el("span", { class: "k" }, "hash"), el("span", { class: "mono" }, run.config_hash || "—")), el("br"),
  codeBlock("Config", run.config_content, "config-content"));
}

const diffClass = (line) => (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") ? "file"
  : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "");

function reproduce() {
  let cli = run.cli;
  try { cli = cli && JSON.stringify(JSON.parse(cli), null, 2); } catch (e) { /* shown as stored */ }
  tabBody.append(codeBlock("Command", run.command, "command"), el("br"), codeBlock("CLI arguments", cli, "cli"), el("br"),
    el("div", { class: "kv card" }, el("span", { class: "k" }, "git commit"), el("span", { class: "mono" }, run.git_commit || "—")), el("br"),
    codeBlock("Uncommitted changes (git diff)", run.git_diff, "git-diff", diffClass));
}

start();
