// The run page's Logs tab (captured console, live tail, search) and Environment tab; exported
// as runTabs, which run.js adds to its tabs. Every logged string goes in as text, never as HTML.
import * as TB from "./common.js";
import { following } from "./live.js";

const { el } = TB;
const TAIL_EVERY = 2000; // ms between polls of a running run's console
const KEEP_LINES = 5000; // lines kept on the page; older ones scroll out of the DOM

const clock = (ms) => (ms / 1000).toFixed(1) + " s";

function logsTab(body, ctx) {
  let after = 0;
  let search = "";
  let timer = null;
  const list = el("div", { class: "console mono", id: "console-lines" });
  const count = el("span", { class: "muted", id: "console-count" });
  const box = el("input", { type: "search", id: "console-search", placeholder: "search the log…",
    onkeydown: (e) => { if (e.key === "Enter") { search = e.target.value; restart(); } } });
  body.append(el("div", { class: "toolbar" }, box, count), list);

  function line(entry) {
    return el("div", { class: `console-line ${entry.stream}`, dataset: { id: entry.console_id } },
      el("span", { class: "t" }, clock(entry.walltime_ms)), el("span", { class: "s" }, entry.stream),
      el("span", { class: "l" }, entry.line));
  }

  async function fetchMore() {
    timer = null;
    if (!list.isConnected) return; // another tab was opened
    const query = new URLSearchParams({ after: String(after) });
    if (search) query.set("search", search);
    try {
      const answer = await TB.getJSON(`/api/runs/${ctx.runId}/console?${query}`);
      if (!list.isConnected) return;
      const follow = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
      list.append(...answer.lines.map(line));
      while (list.childElementCount > KEEP_LINES) list.firstElementChild.remove();
      after = answer.last;
      count.textContent = `${list.childElementCount} lines${search ? " matching" : ""}`;
      if (follow) list.scrollTop = list.scrollHeight;
      if (answer.lines.length) { timer = setTimeout(fetchMore, 0); return; } // more pages waiting
    } catch (e) { count.textContent = e.message; }
    if (ctx.run.status === "running" && following) timer = setTimeout(fetchMore, TAIL_EVERY);
    else if (!list.childElementCount) list.replaceChildren(el("div", { class: "empty-state" }, "no console captured (new_run(..., capture_console=True))"));
  }

  function restart() {
    if (timer) clearTimeout(timer);
    after = 0;
    list.replaceChildren();
    fetchMore();
  }
  fetchMore();
}

async function environmentTab(body, ctx) {
  const { environment: env } = await TB.getJSON(`/api/runs/${ctx.runId}/environment`);
  if (!env) { body.append(el("div", { class: "empty-state" }, "no environment recorded")); return; }
  const kv = (title, object) => el("div", { class: "card" }, el("div", { class: "block-head" }, el("strong", {}, title)),
    Object.keys(object).length ? el("div", { class: "kv" }, Object.entries(object).flatMap(([k, v]) => [el("span", { class: "k" }, k),
      el("span", { class: "mono" }, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))]))
      : el("div", { class: "empty-state" }, "none"));
  const { packages, env: variables, ...machine } = env;
  body.append(el("div", { class: "charts", id: "environment" }, kv("Machine", machine),
    kv("Environment variables", variables || {}), kv(`Packages (${Object.keys(packages || {}).length})`, packages || {})));
}

export const runTabs = [["logs", "Logs", logsTab], ["environment", "Environment", environmentTab]];
