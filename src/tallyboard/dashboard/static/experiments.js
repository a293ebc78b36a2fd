// The project selector of the runs table and the hparams page: a table that holds several
// experiments opens on one of them (the one started last), with only its runs and its columns, as
// W&B and MLflow scope runs to a project; every experiment is one choice away. Kept in the URL as
// `experiment`: "" the latest, "*" every experiment, else a name.
import * as TB from "./common.js";

const { el } = TB;
export const ALL = "*";

// { experiments, scope }: the table's experiments (the latest first) and the one a view shows
// (null: every run, because the table holds one experiment or "*" was chosen).
export async function experimentScope(wanted) {
  const { experiments } = await TB.getJSON("/api/experiments");
  const names = experiments.map((e) => e.experiment);
  if (names.length < 2 || wanted === ALL) return { experiments, scope: null };
  return { experiments, scope: names.includes(wanted) ? wanted : names[0] };
}

// The selector (null for a table of one experiment); onChange gets "*" or a name.
export function experimentSelect(experiments, scope, onChange) {
  if (experiments.length < 2) return null;
  const options = [el("option", { value: ALL, selected: scope === null }, `all experiments (${experiments.length})`),
    ...experiments.map((e) => el("option", { value: e.experiment, selected: e.experiment === scope }, `${e.experiment} (${e.runs})`))];
  return el("select", { id: "experiment", title: "the experiment whose runs and columns are shown",
    onchange: (event) => onChange(event.target.value) }, options);
}
