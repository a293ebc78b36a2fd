// The run page's Tables tab: the tables a run logged (`add_table`, W&B's Table, MLflow's
// log_table; texts of kind 'table', store/table_content.py's JSON), newest last, each cell put in
// as text, never as HTML. Exported as a tab for run.js, as run-logs.js's tabs are.
import * as TB from "./common.js";

const { el } = TB;
const SHOWN_ROWS = 1000; // rows drawn per table; the query API reads the whole of it

const shown = (value) => (value === null ? "" : typeof value === "object" ? JSON.stringify(value) : String(value));

function tableCard(item) {
  let table;
  try { table = JSON.parse(item.content); } catch (e) { table = null; }
  const where = `${item.tag} · step ${item.step}${item.epoch !== null ? ` · epoch ${item.epoch}` : ""} · rep ${item.rep}`;
  if (!table || !Array.isArray(table.columns) || !Array.isArray(table.data)) {
    return el("div", { class: "card item" }, el("div", { class: "meta" }, where), el("pre", { class: "mono" }, item.content));
  }
  const rows = table.data.slice(0, SHOWN_ROWS);
  const more = table.data.length - rows.length;
  return el("div", { class: "card item logged-table", dataset: { tag: item.tag } },
    el("div", { class: "meta" }, `${where} · ${table.data.length} rows × ${table.columns.length} columns`),
    el("div", { class: "table-wrap" }, el("table", { class: "runs" },
      el("thead", {}, el("tr", {}, table.columns.map((name) => el("th", {}, name)))),
      el("tbody", {}, rows.map((row) => el("tr", {}, row.map((value) => el("td", { class: "mono" }, shown(value)))))))),
    more > 0 ? el("div", { class: "muted" }, `${more} more rows: table.logged_table(${item.run_id}, ${JSON.stringify(item.tag)}) has them all`) : null);
}

async function tablesTab(body, ctx) {
  const { texts: items } = await TB.getJSON(`/api/runs/${ctx.runId}/texts?kind=table`);
  if (!items.length) { body.append(el("div", { class: "empty-state" }, "no tables logged")); return; }
  body.append(el("div", { id: "logged-tables" }, items.map((item) => tableCard({ run_id: ctx.runId, ...item }))));
}

export const tableTabs = [["table", "Tables", tablesTab]];
