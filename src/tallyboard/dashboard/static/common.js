// Shared helpers of the dashboard pages (an ES module; each page's script imports what it uses).
// User text only ever enters the DOM via textContent.
export { number, format, duration, shorten, fileName, thousands } from "./values.js";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
export const readOnly = document.querySelector('meta[name="read-only"]').content === "true";

// The first screen's answers, written into the page by the server (dashboard/first_view.py): the
// requests a page makes first, each answered once without a round trip. Kept in a
// <script type="application/json">, read as data, never run.
const firstView = (() => {
  const node = document.getElementById("first-view");
  try { return new Map(Object.entries(node ? JSON.parse(node.textContent) : {})); } catch (e) { return new Map(); }
})();
const requestOf = (url) => {
  const parsed = new URL(url, location.origin);
  return { path: parsed.pathname, query: new Map(parsed.searchParams) };
};

// The inlined answer to a GET of `url`, once (later asks fetch): one of the same path whose query
// has the same parameters, where `fits(asked, inlined)` (each a Map) may let some differ.
export function firstAnswer(url, fits = (asked, inlined) => asked.size === inlined.size
  && [...asked].every(([key, value]) => inlined.get(key) === value)) {
  const asked = requestOf(url);
  for (const [key, answer] of firstView) {
    const inlined = requestOf(key);
    if (inlined.path === asked.path && fits(asked.query, inlined.query)) { firstView.delete(key); return answer; }
  }
  return undefined;
}

export async function getJSON(url) {
  const first = firstAnswer(url);
  if (first !== undefined) return first;
  const response = await fetch(url, { credentials: "same-origin" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

export async function postJSON(url, data) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(data),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// el("div", {class: "x", onclick: f}, "text", child): builds DOM without parsing markup.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  // for...in and a recursive append, not Object.entries and flat(): el builds every cell of the
  // runs table, and those two allocate an array a call
  for (const key in attrs) {
    const value = attrs[key];
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  appendAll(node, children);
  return node;
}

function appendAll(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendAll(node, child);
    else node.append(child instanceof Node ? child : String(child));
  }
}

const PALETTE = ["#5b9cff", "#f5a524", "#3ecf8e", "#f25f5c", "#b084ff", "#2ad4d9", "#ff7ab6", "#c4d64b",
  "#ff8f4f", "#8fa8ff", "#56e39f", "#e05dd6"];
export const color = (i) => PALETTE[((i % PALETTE.length) + PALETTE.length) % PALETTE.length];



// A run's hparam or result by name: only its own keys (an hparam called "constructor" on one run
// must not make every other run show Object's constructor).
export function cell(row, name) {
  return Object.hasOwn(row.cells, name) ? row.cells[name] : undefined;
}

// The runs a view of several runs shows by default: not the debug run (id -1, a scratch run), not
// hidden runs, and failed runs only when asked (a diverged run squashes every axis). `out` says
// what was left out, for the page to say so next to the toggle (`viewNote`).
export const DEBUG_RUN = -1;
export function viewRuns(rows, withFailed) {
  const out = { debug: 0, hidden: 0, failed: 0 };
  const shown = rows.filter((r) => {
    const why = r.run_id === DEBUG_RUN ? "debug" : r.hidden ? "hidden" : !withFailed && r.status === "failed" ? "failed" : null;
    if (why) out[why] += 1;
    return !why;
  });
  return { shown, out };
}

// What `viewRuns` left out, and the visible toggle that brings failed runs back (`change(on)`).
export function viewNote(out, withFailed, change) {
  const parts = [out.debug ? "the debug run" : "", out.hidden ? `${out.hidden} hidden` : "", out.failed ? `${out.failed} failed` : ""].filter(Boolean);
  return el("div", { class: "view-note" },
    el("label", { class: "chip", title: "failed runs are left out by default: a diverged run squashes the axes" },
      el("input", { type: "checkbox", id: "with-failed", checked: withFailed, onchange: (e) => change(e.target.checked) }), "failed runs"),
    parts.length ? el("span", { class: "muted", id: "left-out" }, ` left out: ${parts.join(", ")}`) : null);
}

export function time(seconds) {
  if (!seconds) return "";
  const d = new Date(seconds * 1000), two = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}


export function statusBadge(status) {
  return el("span", { class: `status ${["running", "finished", "failed"].includes(status) ? status : ""}` }, status);
}

export function swatch(colour) {
  const node = el("i", { class: "swatch" });
  node.style.background = colour;  // CSSOM, allowed by the page's style-src 'self'
  return node;
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

export function download(name, blob) {
  const link = el("a", { href: URL.createObjectURL(blob), download: name });
  document.body.append(link);
  link.click();
  setTimeout(() => { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
}

// The URL's query string is the view state: links reproduce what one sees.
export function readState(defaults) {
  const query = new URLSearchParams(location.search);
  const state = { ...defaults };
  for (const key of Object.keys(defaults)) if (query.has(key)) state[key] = query.get(key);
  return state;
}
// Writes `state`'s keys into the URL and leaves every other key as it is: two parts of a page (the
// compare page and its statistics panel) each own some of the URL, and neither may drop the other's.
export function writeState(state, defaults) {
  const query = new URLSearchParams(location.search);
  for (const [key, value] of Object.entries(state)) {
    if (value !== undefined && value !== null && String(value) !== String(defaults[key] ?? "")) query.set(key, value);
    else query.delete(key);
  }
  const address = `${location.pathname}${query.toString() ? "?" + query : ""}`;
  // replaceState costs milliseconds even when nothing changes (the first screen saves its state)
  if (address !== location.pathname + location.search) history.replaceState(null, "", address);
}
