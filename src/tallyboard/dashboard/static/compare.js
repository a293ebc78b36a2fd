// The compare page: 2..50 runs overlaid per metric, one section per split, grouping by an hparam.
// The URL holds the whole view state, so a link reproduces exactly this view.
"use strict";

(() => {
  const { el } = TB;
  const DEFAULTS = { runs: "", smooth: "0.6", x: "step", log: "0", group: "", band: "minmax", reps: "mean" };
  const state = TB.readState(DEFAULTS);
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  const metrics = new Map(); // metric -> {series, lo, bucket, range, charts: Map(split -> chart)}
  let runs = [];

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
    runs.forEach((r, i) => { r.colour = r.color || TB.color(i); });
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
        body.append(el("div", { class: "head" }, el("h4", {}, metric), reset, png));
        grid.append(body);
        entry.charts.set(split, new TB.Chart(body, { onZoom: (range) => load(entry, range) }));
      }
    }
    await Promise.all([...metrics.values()].map((entry) => load(entry, null)));
    if (runs.some((r) => r.status === "running")) pollLive();
  }

  const splitRank = (s) => ({ train: 0, val: 1, valid: 1, validation: 1, test: 2 }[s] ?? 3);

  function sidebar() {
    const hparams = [...new Set(runs.flatMap((r) => Object.keys(r.cells)))].sort();
    const control = (label, node) => el("label", {}, label, node);
    const select = (id, key, options) => el("select", { id, onchange: (e) => { save({ [key]: e.target.value }); redraw(); } },
      options.map(([v, t]) => el("option", { value: v, selected: state[key] === v }, t)));
    const smooth = el("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: state.smooth, id: "smoothing" });
    const smoothLabel = el("span", { class: "muted" }, Number(state.smooth).toFixed(2));
    smooth.addEventListener("input", () => { smoothLabel.textContent = Number(smooth.value).toFixed(2); save({ smooth: smooth.value }); redraw(); });
    const legend = el("div", { class: "legend", id: "runs-legend" }, runs.map((r) =>
      el("span", {}, TB.swatch(r.colour), el("a", { href: `/runs/${r.run_id}` }, `#${r.run_id}`), r.note || r.comment || r.experiment)));
    legend.style.flexDirection = "column";
    return el("aside", { class: "card side" },
      el("h3", {}, `${runs.length} runs`), legend,
      el("h3", {}, "Charts"),
      el("div", {}, el("label", {}, "Smoothing", smoothLabel), smooth),
      control("X axis", select("x-axis", "x", [["step", "Step"], ["epoch", "Epoch"], ["wall", "Wall time"], ["relative", "Relative time"]])),
      control("Log scale", el("input", { type: "checkbox", id: "log-y", checked: state.log === "1",
        onchange: (e) => { save({ log: e.target.checked ? "1" : "0" }); redraw(); } })),
      control("Repetitions", select("reps", "reps", [["mean", "mean per run"], ["lines", "each a line"]])),
      control("Group by", select("group", "group", [["", "nothing (one line per run)"], ...hparams.map((h) => [h, h])])),
      control("Band", select("band", "band", [["minmax", "min – max"], ["std", "± std"]])));
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
      return { ...s, color: r.colour, run: r, label: `#${s.run_id}${r.note || r.comment ? ` ${r.note || r.comment}` : ""}` };
    });
    if (state.group) {
      const keyOf = (l) => `${state.group}=${TB.format(l.run.cells[state.group]) || "∅"}`;
      return TB.aggregate(lines, keyOf, state.band, entry.lo, entry.bucket)
        .map((l, i) => ({ ...l, color: TB.color(i), label: `${l.label} (${l.members} series)` }));
    }
    if (state.reps === "mean" && lines.some((l) => l.rep > 0)) {
      const colours = new Map(lines.map((l) => [l.run_id, l.color]));
      const labels = new Map(lines.map((l) => [l.run_id, l.label]));
      return TB.aggregate(lines, (l) => l.run_id, state.band, entry.lo, entry.bucket)
        .map((l) => ({ ...l, color: colours.get(l.run_id), label: labels.get(l.run_id) }));
    }
    return lines.map((l) => (l.rep > 0 ? { ...l, label: `${l.label} · rep ${l.rep}`, dash: [6, 3] } : l));
  }

  function draw(entry) {
    const settings = { x: state.x, smoothing: Number(state.smooth), logY: state.log === "1" };
    for (const [split, chart] of entry.charts) chart.set(linesFor(entry, split), settings);
  }

  function redraw() { for (const entry of metrics.values()) draw(entry); }

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
