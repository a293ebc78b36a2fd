// The runs table: server-side sort/filter/paging, column preferences, selection, live refresh.
import * as TB from "./common.js";
import { markRuns } from "./alerts.js";
import { experimentScope, experimentSelect } from "./experiments.js";
import { live as stream } from "./live.js";

const { el } = TB;
const DEFAULTS = { sort: "run_id", desc: "0", filter: "", q: "", hidden: "0", offset: "0", limit: "100", experiment: "" };
const state = TB.readState(DEFAULTS);
const selected = new Set();
let page = null, version = null, columnsOpen = false;
let scope = null; // the experiment shown (experiments.js), null for every run
const live = document.getElementById("live");

document.getElementById("nav-runs").classList.add("active");
const filterInput = el("input", { type: "text", class: "filter", placeholder: 'filter: lr < 1e-3 and status == "finished"',
  value: state.filter, spellcheck: false, id: "filter" });
const searchInput = el("input", { type: "search", placeholder: "search…", value: state.q, id: "search" });
const hiddenBox = el("input", { type: "checkbox", checked: state.hidden === "1", id: "show-hidden" });
const compareButton = el("button", { class: "primary", id: "compare", disabled: true, onclick: openCompare }, "Compare");
const columnsButton = el("button", { id: "columns-button", onclick: toggleColumns }, "Columns");
const diffButton = el("button", { id: "diff", disabled: true, title: "what changed between 2 to 10 selected runs", onclick: () => openWith("/diff") }, "Diff");
const hparamsButton = el("button", { id: "hparams", title: "hparams views of the selected runs (or of the filtered table)", onclick: openHparams }, "Hparams");
const error = el("div", { class: "error", id: "filter-error" });
const count = el("span", { class: "muted", id: "count" });
const table = el("table", { class: "runs", id: "runs" });
// A page of many rows draws only those in view (and a few around them): the table sits in a sizer as
// tall as all of them, moved to where the drawn rows belong, so the scroll bar is the whole page's.
const sizer = el("div", { class: "table-sizer" }, table);
const wrap = el("div", { class: "table-wrap" }, sizer);
const VIRTUAL_FROM = 40, OVERSCAN = 8; // rows of a page from which only those in view are drawn; extra rows drawn
let rowHeight = 33, headHeight = 34, viewHeight = 0, drawn = [0, 0]; // px, until measured after a frame
const pager = el("div", { class: "pager" });
const columnsPanel = el("div", { class: "card panel-columns", hidden: true, id: "columns-panel" });
const tagOptions = el("datalist", { id: "table-tags" });
document.getElementById("main").append(tagOptions,
  el("div", { class: "toolbar" }, filterInput, searchInput,
    el("label", { class: "chip" }, hiddenBox, "show hidden"), columnsButton, hparamsButton, diffButton, compareButton, count),
  error, columnsPanel,
  el("div", { class: "card" }, wrap, pager));

filterInput.addEventListener("keydown", (e) => { if (e.key === "Enter") update({ filter: filterInput.value, offset: "0" }); });
filterInput.addEventListener("input", TB.debounce(() => update({ filter: filterInput.value, offset: "0" }), 500));
searchInput.addEventListener("input", TB.debounce(() => update({ q: searchInput.value, offset: "0" }), 250));
hiddenBox.addEventListener("change", () => update({ hidden: hiddenBox.checked ? "1" : "0", offset: "0" }));

function update(changes) {
  Object.assign(state, changes);
  wrap.scrollTop = 0; // another view or page starts at its top
  TB.writeState(state, DEFAULTS);
  load();
}

// What selects the view's runs (a page's count), and the whole view (its pages' cursors).
const selects = () => ({ filter: state.filter, q: state.q, hidden: state.hidden === "1", ...(scope === null ? {} : { experiment: scope }) });
const viewKey = () => JSON.stringify([state.sort, state.desc, state.limit, selects()]);
// A page of a big view is read from where the page before ended (its `next` cursor): page N costs
// what page 1 costs. The cursors of the pages seen, by offset, for the current view only.
let cursors = { view: null, at: new Map() };
// The exact count, asked for after the page is shown when the page says only "at least".
let exact = { selects: null, total: null };

function query() {
  if (cursors.view !== viewKey()) cursors = { view: viewKey(), at: new Map() };
  const params = { offset: state.offset, limit: state.limit, sort: state.sort, desc: state.desc === "1", ...selects() };
  const after = cursors.at.get(+state.offset);
  return new URLSearchParams(after && +state.offset > 0 ? { ...params, after } : params);
}

async function load() {
  let view;
  try {
    view = viewKey();
    page = await TB.getJSON(`/api/runs?${query()}`);
    error.textContent = "";
    filterInput.classList.remove("bad");
  } catch (e) {
    error.textContent = e.message;
    filterInput.classList.add("bad");
    return;
  }
  if (page.next && cursors.view === view) cursors.at.set(+state.offset + +state.limit, page.next);
  version = page.version;
  live.className = "live"; live.textContent = "live";
  render();
  countExactly().catch(() => {});  // the count stays "at least" if it cannot be had
}

async function countExactly() {
  const asked = JSON.stringify([selects(), version]);
  if (page.total_exact !== false || exact.selects === asked) return;
  const { total } = await TB.getJSON(`/api/runs/count?${new URLSearchParams(selects())}`);
  exact = { selects: asked, total };
  if (JSON.stringify([selects(), version]) === asked) render();
}

// The view's number of runs and whether it is exact (a page may say "at least").
function viewTotal() {
  const known = exact.selects === JSON.stringify([selects(), version]);
  if (page.total_exact === false && !known) return { total: page.total, more: true };
  return { total: known && page.total_exact === false ? exact.total : page.total, more: false };
}

const visibleColumns = () => page.columns.filter((c) => c.position !== null);

// Note, tag and status are edited in place: Enter or leaving the field saves, Escape cancels.
const EDITABLE = ["note", "tag", "status"];
function editCell(td, row, name) {
  if (td.querySelector("input, select")) return;
  const input = name === "status"
    ? el("select", {}, ["running", "finished", "failed"].map((s) => el("option", { value: s, selected: s === row.status }, s)))
    : el("input", { type: "text", value: row[name] || "", list: name === "tag" ? "table-tags" : null });
  let done = false;
  const finish = (save) => {
    if (done) return;
    done = true;
    if (save && input.value !== (row[name] || "")) edit(row.run_id, { [name]: input.value });
    else render();
  };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") finish(true); if (e.key === "Escape") finish(false); });
  input.addEventListener("blur", () => finish(true));
  if (name === "status") input.addEventListener("change", () => finish(true));
  input.addEventListener("click", (e) => e.stopPropagation());
  td.classList.remove("empty");
  td.replaceChildren(input);
  input.focus();
}

// Writes a cell's value into `td`, a cell of the blank row, whose own classes (`base`) it keeps.
// The cells of the rows in view are the first screen's most repeated code, run once and cold.
function fill(td, base, row, column) {
  const value = column.kind === "run" ? (Object.hasOwn(row, column.name) ? row[column.name] : undefined) : TB.cell(row, column.name);
  if (value === null || value === undefined || value === "") td.className = base + "empty";
  else if (typeof value === "number") {
    td.className = base + "num";
    td.textContent = TB.format(value);
  } else if (column.name === "status") td.append(TB.statusBadge(value));
  else if (column.name === "start_time" || column.name === "end_time") td.textContent = TB.time(value);
  else if (column.name === "color") td.append(TB.swatch(value), " ", value);
  else if (Array.isArray(value)) {
    td.className = base + (value.length ? "tags" : "empty");
    for (const t of value) td.append(el("span", { class: "chip" }, t));
  } else td.textContent = TB.format(TB.number(value));
}

// A cell cut short by the column's width shows its whole text on hover: its title is written when
// the pointer reaches it, not for each of a page's thousands of cells as they are drawn.
table.addEventListener("mouseover", (e) => {
  const td = e.target.closest("tbody td");
  if (td && !td.title && !td.childElementCount && td.textContent) td.title = td.textContent;
});

function header() {
  const cols = visibleColumns();
  const selectAll = el("input", { type: "checkbox", title: "select this page",
    checked: page.rows.length > 0 && page.rows.every((r) => selected.has(r.run_id)),
    onclick: (e) => { e.stopPropagation(); page.rows.forEach((r) => (e.target.checked ? selected.add(r.run_id) : selected.delete(r.run_id))); render(); } });
  return el("thead", {}, el("tr", {}, el("th", {}, selectAll),
    ...cols.map((c) => {
      const sorted = state.sort === c.name;
      return el("th", { class: sorted ? "sorted" : "", title: `${c.name} (${c.kind})`, dataset: { column: c.name },
        onclick: () => update({ sort: c.name, desc: sorted && state.desc !== "1" ? "1" : "0", offset: "0" }) },
      c.alias, sorted ? el("span", { class: "arrow" }, state.desc === "1" ? "▼" : "▲") : null);
    }), el("th", { class: "tools" }, "")));
}

// A page's rows are copies of one blank row made for the view's columns, filled in, and their
// controls are answered by one listener on the table (below): a handful of elements and closures
// made anew for each row were most of the first screen's script.
function blankRow(cols) {
  const editable = !TB.readOnly;
  return el("tr", {},
    el("td", { class: "pick" }, el("input", { type: "checkbox" }), el("i", { class: "dot", role: "img" })),
    cols.map((c) => (editable && EDITABLE.includes(c.name)
      ? el("td", { class: "editable", title: `click to edit the ${c.alias.toLowerCase()}`, dataset: { column: c.name } })
      : document.createElement("td"))),
    el("td", { class: "tools" }, el("button", { class: "colour", title: "row colour", disabled: TB.readOnly }), " ",
      el("button", { class: "icon-btn", title: "hide this run", disabled: TB.readOnly }, "hide")));
}

function row(run, cols, bases, blank) {
  const tr = blank.cloneNode(true), chosen = selected.has(run.run_id);
  tr.setAttribute("data-run", run.run_id);
  if (chosen || run.hidden) tr.className = `${chosen ? "selected" : ""} ${run.hidden ? "hidden-run" : ""}`;
  const pick = tr.firstChild, dot = pick.lastChild;
  if (chosen) pick.firstChild.checked = true;
  dot.className = `dot ${run.status}`;
  dot.title = run.status;
  dot.setAttribute("aria-label", run.status);
  let td = pick.nextSibling;
  for (let i = 0; i < cols.length; i++) {
    fill(td, bases[i], run, cols[i]);
    td = td.nextSibling;
  }
  if (run.color) {
    pick.style.borderLeftColor = run.color;
    td.firstChild.style.backgroundColor = run.color; // CSSOM, allowed by the page's CSP
  }
  if (run.hidden) {
    td.lastChild.title = "show this run";
    td.lastChild.textContent = "show";
  }
  return tr;
}

// What a click in a row does: its controls act on the run; anywhere else opens the run's page.
// (A field being edited, a colour input and an alert's marker stop their own clicks.)
table.addEventListener("click", (e) => {
  const tr = e.target.closest("tbody tr[data-run]");
  const run = tr && page.rows.find((r) => r.run_id === +tr.dataset.run);
  if (!run) return;
  const control = e.target.closest("td.pick input, button.colour, button.icon-btn, td.editable");
  if (control && control.disabled) return; // a read-only table's buttons
  if (!control) location.href = `/runs/${run.run_id}`;
  else if (control.matches("td.pick input")) {
    if (control.checked) selected.add(run.run_id); else selected.delete(run.run_id);
    renderSelection();
  } else if (control.matches("button.colour")) pickColour(control, run);
  else if (control.matches("button.icon-btn")) edit(run.run_id, { hidden: !run.hidden });
  else editCell(control, run, control.dataset.column);
});

// A row's colour is a swatch that becomes the browser's colour input when clicked. Why not the
// input at once: a page's rows in view each had one, and laying them out took a third of its first rows.
const DEFAULT_COLOUR = "#5b9cff";
function pickColour(button, run) {
  const input = el("input", { type: "color", class: "colour", value: run.color || DEFAULT_COLOUR, title: "row colour",
    onclick: (event) => event.stopPropagation(), onchange: (event) => edit(run.run_id, { color: event.target.value }) });
  button.replaceWith(input);
  try { input.showPicker(); } catch (error) { input.click(); } // showPicker needs a click, which this is
}

const virtual = () => page.rows.length >= VIRTUAL_FROM;

// The rows [first, last) of the page that are in view when it is scrolled to `top`, with OVERSCAN
// more on each side. Before the first frame the box is empty (viewHeight 0): the window's height
// stands in for it, as `outerHeight`, which a browser knows without laying the page out (reading
// `innerHeight` forces a layout of the page before its rows are in it); it is never less.
function rowsInView(top) {
  if (!virtual()) return [0, page.rows.length];
  const from = Math.max(0, top - headHeight);
  const height = Math.max(viewHeight, outerHeight - 200);
  return [Math.max(0, Math.floor(from / rowHeight) - OVERSCAN),
    Math.min(page.rows.length, Math.ceil((from + height) / rowHeight) + OVERSCAN)];
}

// Draws the rows in view. It reads no layout: the heights it places rows by are those measured
// after the last frame (`measureRows`), so the new rows are laid out once, by the frame that shows
// them, rather than first by a read here (on a wide table that read was most of the first screen).
function drawRows() {
  drawn = rowsInView(viewHeight ? wrap.scrollTop : 0); // nothing has scrolled before the first frame
  const cols = visibleColumns(), blank = blankRow(cols);
  const bases = [...blank.children].slice(1, -1).map((td) => (td.className ? `${td.className} ` : ""));
  const body = el("tbody", {}, page.rows.slice(...drawn).map((run) => row(run, cols, bases, blank)));
  if (table.tBodies.length) table.tBodies[0].replaceWith(body); else table.append(body);
  placeRows();
  selectionChanged();
  markRuns(table); // the alerts' markers of the rows just drawn
  if (virtual()) requestAnimationFrame(measureRows);
}

function placeRows() {
  sizer.style.height = virtual() ? `${headHeight + page.rows.length * rowHeight}px` : "";
  table.style.transform = virtual() ? `translateY(${drawn[0] * rowHeight}px)` : "";
}

// The heights as laid out (fractional, as rows are), read in the frame after a draw; where they
// differ from those the rows were placed and chosen by, the rows are placed or drawn again.
function measureRows() {
  const body = table.tBodies[0];
  if (!page || !virtual() || !body || !body.rows.length) return;
  const measured = { rowHeight: body.rows[0].getBoundingClientRect().height || rowHeight,
    headHeight: table.tHead ? table.tHead.getBoundingClientRect().height : 0, viewHeight: wrap.clientHeight };
  const moved = measured.rowHeight !== rowHeight || measured.headHeight !== headHeight;
  ({ rowHeight, headHeight, viewHeight } = measured);
  const [first, last] = rowsInView(wrap.scrollTop);
  if (first !== drawn[0] || last !== drawn[1]) drawRows(); else if (moved) placeRows();
}

let scrollQueued = false;
wrap.addEventListener("scroll", () => {
  if (!page || !virtual() || scrollQueued) return;
  scrollQueued = true;
  requestAnimationFrame(() => {
    scrollQueued = false;
    if (table.querySelector("td.editable input, td.editable select")) return; // a cell being edited stays
    const [first, last] = rowsInView(wrap.scrollTop);
    if (first !== drawn[0] || last !== drawn[1]) drawRows();
  });
}, { passive: true });

function render() {
  table.replaceChildren(header());
  drawRows();
  // For benchmarks: when the first rows were drawn, in ms since the navigation began.
  if (!performance.getEntriesByName("tallyboard:first-rows").length) performance.mark("tallyboard:first-rows");
  if (!page.rows.length) table.tBodies[0].append(el("tr", {}, el("td", { colspan: 99, class: "empty-state" }, "no runs match")));
  const offset = +state.offset, limit = +state.limit;
  const { total, more } = viewTotal();
  const shown = `${TB.thousands(total)}${more ? "+" : ""}`;
  count.textContent = `${shown} run${total === 1 && !more ? "" : "s"}`;
  const last = page.rows.length < limit || (!more && offset + limit >= total);
  pager.replaceChildren(
    el("span", {}, page.rows.length ? `${offset + 1}–${offset + page.rows.length} of ${shown}` : ""),
    el("span", {},
      el("button", { disabled: offset === 0, onclick: () => update({ offset: String(Math.max(0, offset - limit)) }) }, "‹ Prev"), " ",
      el("button", { id: "next-page", disabled: last, onclick: () => update({ offset: String(offset + limit) }) }, "Next ›")));
  if (columnsOpen) renderColumns();
}

function renderSelection() {
  table.querySelectorAll("tbody tr[data-run]").forEach((tr) => tr.classList.toggle("selected", selected.has(+tr.dataset.run)));
  selectionChanged();
}

// What follows the selection but the rows' own mark (rows just drawn carry it): the buttons that
// act on it and the columns it differs in.
function selectionChanged() {
  compareButton.disabled = selected.size < 2 || selected.size > 50;
  compareButton.textContent = selected.size ? `Compare ${selected.size}` : "Compare";
  diffButton.disabled = selected.size < 2 || selected.size > 10;
  markDiffering();
}

// With 2+ runs selected, the hparam columns whose values differ among them are highlighted.
let differing = false; // whether a cell or heading is marked now
function markDiffering() {
  const chosen = page.rows.filter((r) => selected.has(r.run_id));
  const differs = new Set(chosen.length < 2 ? [] : visibleColumns().filter((c) => c.kind === "hparam")
    .filter((c) => new Set(chosen.map((r) => JSON.stringify(TB.cell(r, c.name) ?? null))).size > 1).map((c) => c.name));
  if (!differs.size && !differing) return; // nothing to mark or unmark: every cell of a page drawn
  differing = differs.size > 0;
  const index = new Map(visibleColumns().map((c, i) => [i + 1, c.name]));
  table.querySelectorAll("thead th[data-column]").forEach((th) => th.classList.toggle("differs", differs.has(th.dataset.column)));
  table.querySelectorAll("tbody tr[data-run]").forEach((tr) => {
    [...tr.children].forEach((td, i) => td.classList.toggle("differs", selected.has(+tr.dataset.run) && differs.has(index.get(i))));
  });
}

function openWith(path) {
  location.href = `${path}?runs=${[...selected].join(",")}`;
}

function openHparams() {
  location.href = selected.size >= 2 ? `/hparams?runs=${[...selected].join(",")}` : `/hparams?filter=${encodeURIComponent(state.filter)}&experiment=${encodeURIComponent(scope === null ? "*" : scope)}`;
}

function openCompare() {
  location.href = `/compare?runs=${[...selected].join(",")}`;
}

async function edit(runId, changes) {
  try { await TB.postJSON(`/api/runs/${runId}`, changes); } catch (e) { error.textContent = e.message; }
  load();
}

// Columns panel: show/hide, rename and reorder; saved to the store's `columns` table.
function toggleColumns() {
  columnsOpen = !columnsOpen;
  columnsPanel.hidden = !columnsOpen;
  if (columnsOpen) renderColumns();
}

function renderColumns() {
  const order = page.columns.map((c) => ({ ...c }));
  const draw = () => columnsPanel.replaceChildren(
    el("div", { class: "block-head" }, el("strong", {}, "Columns"),
      el("button", { class: "primary", id: "save-columns", disabled: TB.readOnly, onclick: save }, "Save")),
    ...order.map((c, i) => el("div", { class: "col", dataset: { column: c.name } },
      el("input", { type: "checkbox", checked: c.position !== null, title: "visible",
        onchange: (e) => { c.position = e.target.checked ? i : null; } }),
      el("input", { type: "text", value: c.alias, title: c.name, onchange: (e) => { c.alias = e.target.value || c.name; } }),
      el("button", { class: "icon-btn", title: "move up", disabled: i === 0, onclick: () => { order.splice(i - 1, 0, ...order.splice(i, 1)); draw(); } }, "↑"),
      el("button", { class: "icon-btn", title: "move down", disabled: i === order.length - 1, onclick: () => { order.splice(i + 1, 0, ...order.splice(i, 1)); draw(); } }, "↓"))));
  async function save() {
    const columns = order.map((c, i) => ({ name: c.name, alias: c.alias, position: c.position === null ? null : i }));
    try { await TB.postJSON("/api/columns", { columns }); columnsOpen = false; columnsPanel.hidden = true; load(); }
    catch (e) { error.textContent = e.message; }
  }
  draw();
}

// Live: the server says when a run changed or appeared (live.js); only then are the rows reloaded.
function follow() {
  stream({ table: 1 }, {
    update: (data) => {
      const now = data.version;
      if (now && version && ["runs", "deleted", "updated_at"].some((k) => now[k] !== version[k])) load();
      if (data.alerts && data.alerts.length) markRuns(table, true);
    },
    reset: () => load(),
  });
}
const toolbar = document.querySelector("#main .toolbar");
experimentScope(state.experiment).then(({ experiments, scope: chosen }) => {
  scope = chosen;
  const picker = experimentSelect(experiments, scope, (value) => {
    scope = value === "*" ? null : value;
    selected.clear();
    update({ experiment: value, offset: "0" });
  });
  if (picker) toolbar.prepend(picker);
  return load();
}).then(() => {
  follow();
  // Tag suggestions for editing wait for the first screen: they are not part of it.
  TB.getJSON("/api/tags").then((r) => tagOptions.replaceChildren(...r.tags.map((t) => el("option", { value: t }))));
});
