// The diff page: what changed between 2 to 10 runs (hparams, config, CLI, command, git), each later
// run side by side with the first; unchanged stretches arrive folded from the server.
import * as TB from "./common.js";

const { el } = TB;
const state = TB.readState({ runs: "" });
const main = document.getElementById("main");
const LABELS = { config_content: "Config file", cli: "CLI", command: "Command", git_commit: "Git commit", git_diff: "Git diff" };
const runIds = state.runs.split(",").filter((s) => /^-?\d+$/.test(s)).map(Number);

async function start() {
  if (runIds.length < 2) {
    main.replaceChildren(el("div", { class: "empty-state" }, "Select 2 to 10 runs in the ", el("a", { href: "/" }, "runs table"), " to see what changed."));
    return;
  }
  const diff = await TB.getJSON(`/api/diff?runs=${runIds.join(",")}`);
  main.replaceChildren(el("h1", { class: "diff-title" }, `What changed: ${diff.run_ids.map((id) => `#${id}`).join(" · ")}`),
    hparamsCard(diff), ...diff.fields.map((field) => fieldCard(field, diff.run_ids[0])));
}

function hparamsCard(diff) {
  const differing = new Set(diff.hparams.differing);
  const shown = (values, name) => (Object.hasOwn(values, name) ? TB.format(TB.number(values[name])) : "∅");
  return el("div", { class: "card diff-card", id: "diff-hparams" },
    el("div", { class: "block-head" }, el("strong", {}, "Hparams"), el("span", { class: "muted" },
      differing.size ? `${differing.size} of ${diff.hparams.names.length} differ` : "all the same")),
    el("div", { class: "table-wrap" }, el("table", { class: "runs" },
      el("thead", {}, el("tr", {}, el("th", {}, "hparam"), diff.run_ids.map((id) => el("th", {}, el("a", { href: `/runs/${id}` }, `#${id}`))))),
      el("tbody", {}, diff.hparams.names.map((name) => el("tr", { class: differing.has(name) ? "differs" : "", dataset: { hparam: name } },
        el("td", {}, name), diff.hparams.values.map((values) => el("td", {}, shown(values, name)))))))));
}

function fieldCard(field, baseId) {
  const card = el("div", { class: "card diff-card", dataset: { field: field.field } },
    el("div", { class: "block-head" }, el("strong", {}, LABELS[field.field] || field.field),
      el("span", { class: field.changed ? "chip changed" : "muted" }, field.changed ? "changed" : "same in every run")));
  if (!field.changed) return card;
  for (const other of field.against) {
    if (!other.changed) { card.append(el("div", { class: "muted diff-same" }, `#${other.run_id}: same as #${baseId}`)); continue; }
    card.append(el("div", { class: "table-wrap diff-wrap" }, el("table", { class: "diff" },
      el("thead", {}, el("tr", {}, el("th", {}, `#${baseId}`), el("th", {}, `#${other.run_id}`))),
      el("tbody", {}, other.rows.map(diffRow)))));
  }
  return card;
}

function diffRow(row) {
  if (row.op === "fold") return el("tr", { class: "fold" }, el("td", { colspan: 2 }, `⋯ ${row.count} unchanged line${row.count === 1 ? "" : "s"}`));
  const side = (text, cls) => el("td", { class: text === null ? "none" : cls }, text === null ? "" : text);
  const [left, right] = row.op === "equal" ? ["", ""] : ["del", "add"];
  return el("tr", { class: row.op }, side(row.a, left), side(row.b, right));
}

start().catch((e) => main.replaceChildren(el("div", { class: "empty-state error" }, e.message)));
