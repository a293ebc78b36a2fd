// The compare page: 2..50 runs overlaid per metric, one section per split, grouping by an hparam.
// The URL holds the whole view state, so a link reproduces exactly this view.
"use strict";

(() => {
  const { el } = TB;
  const DEFAULTS = { runs: "", smooth: "auto", x: "step", log: "0", group: "", band: "minmax", reps: "mean" };
  const state = TB.readState(DEFAULTS);
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  const metrics = new Map(); // metric -> {series, lo, bucket, range, charts: Map(split -> chart)}
  let runs = [], hparamNames = [];
  const legend = el("div", { class: "legend runs-legend", id: "runs-legend" });

  document.getElementById("nav-compare").classList.add("active");
  const save = (changes) => { Object.assign(state, changes); TB.writeState(state, DEFAULTS); };
  const runIds = state.runs.split(",").filter((s) => /^-?\d+$/.test(s)).map(Number);

  async function start() {
    if (runIds.length < 1) {
      main.replaceChildren(el("div", { class: "empty-state" }, "Select 2 to 50 runs in the ", el("a", { href: "/" }, "runs table"), " to compare them."));
      return;
    }
    const page = await TB.getJSON(`/api/runs?ids=${runIds.join(",")}&limit=50&hidden=1`);
    runs = page.rows;
    hparamNames = page.columns.filter((c) => c.kind === "hparam").map((c) => c.name);
    runs.forEach((r, i) => { r.colour = r.color || TB.color(i); });
    nameRuns(runs, hparamNames);
    const details = await Promise.all(runs.map((r) => TB.getJSON(`/api/runs/${r.run_id}`)));
    const series = details.flatMap((d) => d.series);
    const splits = [...new Set(series.map((s) => s.split))].sort((a, b) => splitRank(a) - splitRank(b) || (a > b) - (a < b));
    const names = [...new Set(series.map((s) => s.metric))].sort();
    const sections = el("section", { id: "sections" });
    main.replaceChildren(el("div", { class: "layout" }, sidebar(), sections));
    for (const split of splits) {
      const grid = el("div", { class: "charts" });
      sections.append(el("h2", { class: "section-title" }, split || "(no split)"), grid);
      for (const metric of names) {
        if (!series.some((s) => s.split === split && s.metric === metric)) continue;
        if (!metrics.has(metric)) metrics.set(metric, { metric, series: [], charts: new Map(), resets: [], range: null, lo: 0, bucket: 1 });
        const entry = metrics.get(metric);
        const body = el("div", { class: "card chart-card", dataset: { metric, split } });
        const png = el("button", { onclick: async () => TB.download(`compare_${split}_${metric}.png`, await entry.charts.get(split).png(`${split}/${metric}`)) }, "PNG");
        const reset = el("button", { hidden: true, onclick: () => load(entry, null) }, "Reset zoom");
        entry.resets.push(reset);
        body.append(el("div", { class: "head" }, el("h4", { title: metric }, metric), reset, png));
        grid.append(body);
        if (TB.nameTooLong(metric)) { png.disabled = true; body.append(TB.tooLong(metric)); metrics.delete(metric); continue; }
        entry.charts.set(split, new TB.Chart(body, { onZoom: (range) => load(entry, range) }));
      }
    }
    const results = page.columns.filter((c) => c.kind === "result").map((c) => c.name).filter((n) => runs.some((r) => Object.hasOwn(r.cells, n)));
    const tags = [...new Set(series.map((s) => s.tag))].sort();
    document.dispatchEvent(new CustomEvent("tb:compare-ready", { detail: { runIds, hparamNames, metrics: tags, results } }));  // stats.js
    await Promise.all([...metrics.values()].map((entry) => load(entry, null)));
    if (runs.some((r) => r.status === "running")) pollLive();
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

  const splitRank = (s) => ({ train: 0, val: 1, valid: 1, validation: 1, test: 2 }[s] ?? 3);

  function sidebar() {
    const hparams = [...hparamNames].sort();
    const control = (label, node) => el("label", {}, label, node);
    const select = (id, key, options) => el("select", { id, onchange: (e) => { save({ [key]: e.target.value }); redraw(); } },
      options.map(([v, t]) => el("option", { value: v, selected: state[key] === v }, t)));
    drawLegend();
    return el("aside", { class: "card side" },
      el("h3", {}, `${runs.length} runs`), legend,
      el("h3", {}, "Charts"),
      TB.smoothingControl(state.smooth, (value) => { save({ smooth: value }); redraw(); }),
      control("X axis", select("x-axis", "x", [["step", "Step"], ["epoch", "Epoch"], ["wall", "Wall time"], ["relative", "Relative time"]])),
      control("Log scale", el("input", { type: "checkbox", id: "log-y", checked: state.log === "1",
        onchange: (e) => { save({ log: e.target.checked ? "1" : "0" }); redraw(); } })),
      control("Repetitions", select("reps", "reps", [["mean", "mean per run"], ["lines", "each a line"]])),
      control("Group by", select("group", "group", [["", "nothing (one line per run)"], ...hparams.map((h) => [h, h])])),
      control("Band", select("band", "band", [["minmax", "min – max"], ["std", "± std"], ["none", "none"]])));
  }

  async function load(entry, range) {
    const first = entry.charts.values().next().value;
    const width = Math.max(200, Math.round(first.area.clientWidth || 600));
    const query = new URLSearchParams({ runs: runIds.join(","), metric: entry.metric, width });
    if (range) { query.set("step_min", range[0]); query.set("step_max", range[1]); }
    const data = await TB.getJSON(`/api/series?${query}`);
    Object.assign(entry, { series: data.series, lo: data.lo, bucket: data.bucket, range });
    entry.resets.forEach((button) => { button.hidden = !range; });  // zoom applies to every split
    draw(entry);
  }

  function linesFor(entry, split) {
    const byId = new Map(runs.map((r) => [r.run_id, r]));
    let lines = entry.series.filter((s) => s.split === split).map((s) => {
      const r = byId.get(s.run_id);
      return { ...s, color: r.colour, run: r, label: r.label };
    });
    const bandMode = state.band === "std" ? "std" : "minmax";
    if (state.group) {
      const colours = groupColours();
      return TB.aggregate(lines, (l) => groupKey(l.run), bandMode, entry.lo, entry.bucket)
        .map((l) => ({ ...l, color: colours.get(l.label), label: `${l.label} (${l.members} series)` }));
    }
    if (state.reps === "mean" && lines.some((l) => l.rep > 0)) {
      const colours = new Map(lines.map((l) => [l.run_id, l.color]));
      const labels = new Map(lines.map((l) => [l.run_id, l.label]));
      return TB.aggregate(lines, (l) => l.run_id, bandMode, entry.lo, entry.bucket)
        .map((l) => ({ ...l, color: colours.get(l.run_id), label: labels.get(l.run_id) }));
    }
    return lines.map((l) => (l.rep > 0 ? { ...l, label: `${l.label} · rep ${l.rep}`, dash: [6, 3] } : l));
  }

  function draw(entry) {
    const settings = { x: state.x, smoothing: TB.smoothing(state.smooth), logY: state.log === "1",
      bands: state.band !== "none", yTitle: entry.metric };
    for (const [split, chart] of entry.charts) chart.set(linesFor(entry, split), settings);
  }

  function redraw() { drawLegend(); for (const entry of metrics.values()) draw(entry); }

  async function pollLive() {
    live.className = "live"; live.textContent = "live";
    const query = new URLSearchParams({ runs: runIds.join(",") });
    for (const entry of metrics.values()) for (const s of entry.series) query.append("after", `${s.run_id}:${s.tag_id}:${s.rep}:${s.last_step}`);
    try {
      const update = await TB.getJSON(`/api/live?${query}`);
      const touched = new Set();
      for (const fresh of update.series) {
        const entry = metrics.get(fresh.metric);
        if (!entry || entry.range) continue;
        const s = entry.series.find((x) => x.run_id === fresh.run_id && x.tag_id === fresh.tag_id && x.rep === fresh.rep);
        if (!s || fresh.more) { load(entry, null); continue; }
        for (const k of ["step", "epoch", "wall", "value", "min", "max"]) s[k].push(...fresh[k]);
        s.last_step = fresh.last_step;
        touched.add(entry);
      }
      touched.forEach(draw);
      if (!update.runs.some((r) => r.status === "running")) { live.className = "live off"; live.textContent = "all finished"; return; }
    } catch (e) { live.className = "live off"; live.textContent = "offline"; }
    setTimeout(pollLive, 2000);
  }

  start();
})();
