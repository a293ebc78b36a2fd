// Charts on top of uPlot (vendored): smoothing, bands, x modes, zoom that re-queries, PNG export.
"use strict";

TB.ema = (values, weight) => {
  // Debiased exponential moving average (as TensorBoard's "smoothing"): no pull towards 0 at the start.
  const out = new Array(values.length);
  let last = 0, count = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !isFinite(v)) { out[i] = v; continue; }
    last = last * weight + (1 - weight) * v;
    count += 1;
    out[i] = last / (1 - Math.pow(weight, count));
  }
  return out;
};

// Default smoothing ("auto"): this weight, and only for lines of at least SMOOTH_MIN points; a short
// series is drawn as logged (smoothing 20 points hides half of a divergence).
TB.AUTO_SMOOTHING = 0.6;
TB.SMOOTH_MIN = 300;
TB.X_TITLES = { step: "step", epoch: "epoch", wall: "wall time", relative: "time since start" };
TB.MAX_NAME = 4000; // characters of a metric or tag name the API takes in a query
TB.nameTooLong = (name) => name.length > TB.MAX_NAME || encodeURIComponent(name).length > 3 * TB.MAX_NAME;

// Values a chart cannot place (NaN, +-inf): left out as gaps, counted for the chart's note. Every
// entry of a series is a logged point, so an empty value is a NaN (the store keeps NaN as NULL).
TB.nonFinite = (values) => values.reduce((n, v) => n + (Number.isFinite(TB.number(v)) ? 0 : 1), 0);

TB.xOf = (line, mode) => {
  if (mode === "epoch") return line.epoch.map((e, i) => (e === null ? null : e));
  if (mode === "wall") return line.wall.map((w) => line.start_time + w);
  if (mode === "relative") return line.wall.slice();
  return line.step.slice();
};

// Mean and band (min-max or +-std) of lines that share bucket boundaries (same request).
TB.aggregate = (lines, keyOf, bandMode, lo, bucket) => {
  const groups = new Map();
  for (const line of lines) {
    const key = keyOf(line);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(line);
  }
  const out = [];
  for (const [key, members] of groups) {
    const buckets = new Map();
    for (const line of members) {
      line.step.forEach((step, i) => {
        const b = bucket > 1 ? Math.floor((step - lo) / bucket) : step;
        const v = TB.number(line.value[i]);
        if (v === null || !isFinite(v)) return;
        if (!buckets.has(b)) buckets.set(b, { step, epoch: line.epoch[i], wall: line.wall[i], start: line.start_time, values: [] });
        buckets.get(b).values.push(v);
      });
    }
    const keys = [...buckets.keys()].sort((a, b) => a - b);
    const agg = { ...members[0], key: `group:${key}`, label: key, members: members.length,
      step: [], epoch: [], wall: [], value: [], min: [], max: [],
      dropped: members.reduce((n, line) => n + TB.nonFinite(line.value), 0) };
    for (const k of keys) {
      const b = buckets.get(k), n = b.values.length;
      const mean = b.values.reduce((a, c) => a + c, 0) / n;
      let low, high;
      if (bandMode === "std") {
        const sd = Math.sqrt(b.values.reduce((a, c) => a + (c - mean) ** 2, 0) / n);
        low = mean - sd; high = mean + sd;
      } else { low = Math.min(...b.values); high = Math.max(...b.values); }
      agg.step.push(b.step); agg.epoch.push(b.epoch); agg.wall.push(b.wall);
      agg.value.push(mean); agg.min.push(low); agg.max.push(high);
    }
    out.push(agg);
  }
  return out;
};

// The smoothing slider of a page: "auto" (the default) until it is moved, then the chosen weight.
TB.smoothingControl = (value, onChange) => {
  const auto = value === "auto";
  const slider = TB.el("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: auto ? TB.AUTO_SMOOTHING : value, id: "smoothing" });
  const label = TB.el("span", { class: "muted", id: "smoothing-label",
    title: `auto: ${TB.AUTO_SMOOTHING} for series of ${TB.SMOOTH_MIN} points or more, none below` },
  auto ? "auto" : Number(value).toFixed(2));
  slider.addEventListener("input", () => { label.textContent = Number(slider.value).toFixed(2); onChange(slider.value); });
  return TB.el("div", {}, TB.el("label", {}, "Smoothing", label), slider);
};
TB.smoothing = (value) => (value === "auto" ? "auto" : Number(value));

// What a card says instead of a chart when the metric's name is too long to ask the API for.
TB.tooLong = (name) => TB.el("div", { class: "empty-state too-long" },
  `This metric's name is ${name.length.toLocaleString()} characters long: charts and CSV exports take names of up to ${TB.MAX_NAME.toLocaleString()}.`);
TB.fileName = (name) => shorten(name, 80).replace(/[^\w.-]+/g, "_");

function shorten(text, most) {
  return text.length > most ? `${text.slice(0, most - 1)}…` : text;
}

function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

TB.Chart = class {
  constructor(container, { onZoom } = {}) {
    this.container = container;
    this.onZoom = onZoom;
    this.plot = null;
    this.lines = [];
    this.settings = { x: "step", smoothing: 0, logY: false, bands: true, yTitle: "" };
    this.readout = TB.el("div", { class: "readout" });
    this.area = TB.el("div", { class: "plot" });
    this.note = TB.el("div", { class: "chart-note" });
    this.legend = TB.el("div", { class: "legend" });
    container.append(this.area, this.readout, this.note, this.legend);
    this.width = 0;
    this.resizer = new ResizeObserver(TB.debounce(() => {
      if (this.plot && Math.abs(this.area.clientWidth - this.width) > 2) this.render();
    }, 120));
    this.resizer.observe(this.area);
    container.chart = this; // for tests and scripts: the chart behind a card
  }

  set(lines, settings) {
    this.lines = lines;
    if (settings) this.settings = { ...this.settings, ...settings };
    this.render();
  }

  // Series the chart shows: data[0] is x, then per line [band low, band high,] raw[, smoothed].
  build() {
    const { x: mode, smoothing, logY, bands: showBands } = this.settings;
    const xs = new Set();
    const perLine = this.lines.map((line) => {
      const x = TB.xOf(line, mode);
      x.forEach((v) => v !== null && xs.add(v));
      return x;
    });
    const xAll = Float64Array.from([...xs].sort((a, b) => a - b));
    const index = new Map();
    xAll.forEach((v, i) => index.set(v, i));
    const clean = (v) => {
      v = TB.number(v);
      if (v === null || v === undefined || !Number.isFinite(v)) return null; // a gap, never a blank chart
      if (logY && v <= 0) return null;
      return v;
    };
    const data = [xAll], series = [{}], bands = [];
    const spread = () => new Array(xAll.length).fill(null);
    this.lines.forEach((line, li) => {
      const x = perLine[li];
      const place = (values) => {
        const out = spread();
        values.forEach((v, i) => { if (x[i] !== null) out[index.get(x[i])] = clean(v); });
        return out;
      };
      const raw = place(line.value);
      const low = place(line.min), high = place(line.max);
      const hasBand = line.min.some((v, i) => TB.number(v) !== TB.number(line.max[i]));
      if (hasBand && showBands) {
        data.push(low, high);
        const lowIdx = data.length - 2, highIdx = data.length - 1;
        series.push({ label: `${line.label} min`, stroke: "transparent", points: { show: false }, spanGaps: true },
          { label: `${line.label} max`, stroke: "transparent", points: { show: false }, spanGaps: true });
        bands.push({ series: [highIdx, lowIdx], fill: alpha(line.color, 0.16) });
      }
      const logged = raw.filter((v) => v !== null).length * Math.max(1, line.bucket || 1); // points behind the buckets
      const weight = smoothing === "auto" ? (logged >= TB.SMOOTH_MIN ? TB.AUTO_SMOOTHING : 0) : smoothing;
      const smooth = weight > 0;
      data.push(raw);
      series.push({ label: line.label, stroke: smooth ? alpha(line.color, 0.28) : line.color, width: smooth ? 1 : 1.75,
        spanGaps: true, points: { show: raw.filter((v) => v !== null).length < 3 }, dash: line.dash });
      if (smooth) {
        const values = raw.filter((v) => v !== null);
        const smoothed = TB.ema(values, weight);
        const full = spread();
        let k = 0;
        // Kept inside the bucket's min-max: a lagging average must not draw where no value was.
        const within = (v, i) => (low[i] === null || high[i] === null ? v : Math.min(Math.max(v, low[i]), high[i]));
        raw.forEach((v, i) => { if (v !== null) full[i] = within(smoothed[k++], i); });
        data.push(full);
        series.push({ label: `${line.label} (smoothed)`, stroke: line.color, width: 2, spanGaps: true,
          points: { show: false }, dash: line.dash, main: true });
      } else series[series.length - 1].main = true;
    });
    return { data, series, bands };
  }

  render() {
    const width = Math.max(200, this.area.clientWidth || 480);
    this.width = width;
    if (this.plot) { this.plot.destroy(); this.plot = null; }
    this.legend.replaceChildren(...this.lines.map((line) => TB.el("span", {}, TB.swatch(line.color), line.label)));
    // Exposed for tests and scripts: how many lines and points this chart shows.
    this.container.dataset.lines = this.lines.length;
    this.container.dataset.points = this.lines.reduce((n, line) => n + line.step.length, 0);
    const dropped = this.lines.reduce((n, line) => n + (line.dropped ?? TB.nonFinite(line.value)), 0);
    this.container.dataset.nonfinite = dropped;
    this.note.textContent = dropped ? `${dropped.toLocaleString()} non-finite value${dropped === 1 ? "" : "s"} (NaN or ±inf) left out: gaps in the line` : "";
    if (!this.lines.length) { this.area.replaceChildren(TB.el("div", { class: "empty-state" }, "no points")); return; }
    this.area.replaceChildren();
    const { data, series, bands } = this.build();
    this.container.dataset.bands = bands.length;
    this.container.dataset.smoothed = series.filter((s) => s.label && s.label.endsWith(" (smoothed)")).length;
    const mode = this.settings.x;
    const axisColor = "#8b93a7", grid = { stroke: "#ffffff10", width: 1 };
    const xValues = mode === "relative" ? (u, ticks) => ticks.map((t) => TB.duration(t)) : undefined;
    const opts = {
      width, height: 250, series, bands,
      legend: { show: false },
      cursor: { drag: { x: true, y: false }, points: { size: 6 } },
      scales: { x: { time: mode === "wall" }, y: { distr: this.settings.logY ? 3 : 1 } },
      axes: [
        { stroke: axisColor, grid, ticks: grid, values: xValues, label: TB.X_TITLES[mode] || mode, labelSize: 22,
          labelFont: "12px system-ui, sans-serif" },
        { stroke: axisColor, grid, ticks: grid, size: 56, label: shorten(this.settings.yTitle, 48), labelSize: 22,
          labelFont: "12px system-ui, sans-serif", values: (u, ticks) => ticks.map((t) => TB.format(t)) },
      ],
      hooks: {
        setSelect: [(u) => {
          if (u.select.width < 4) return;
          const x0 = u.posToVal(u.select.left, "x"), x1 = u.posToVal(u.select.left + u.select.width, "x");
          u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
          const range = this.stepRange(x0, x1);
          if (range && this.onZoom) this.onZoom(range);
        }],
        setCursor: [(u) => this.showReadout(u)],
      },
    };
    this.plot = new uPlot(opts, data, this.area);
    this.plot.over.addEventListener("dblclick", () => this.onZoom && this.onZoom(null));
  }

  showReadout(u) {
    const i = u.cursor.idx;
    if (i === null || i === undefined) { this.readout.textContent = ""; return; }
    const x = u.data[0][i];
    const xText = this.settings.x === "wall" ? TB.time(x) : this.settings.x === "relative" ? TB.duration(x) : TB.format(x);
    const parts = [`${this.settings.x} ${xText}`];
    u.series.forEach((s, k) => { if (s.main && u.data[k][i] !== null) parts.push(`${s.label.replace(" (smoothed)", "")}: ${TB.format(u.data[k][i])}`); });
    this.readout.textContent = parts.join("   ");
  }

  // Steps covered by an x range, so a zoom can ask the server for that range at full resolution.
  stepRange(x0, x1) {
    let lo = Infinity, hi = -Infinity;
    for (const line of this.lines) {
      const x = TB.xOf(line, this.settings.x);
      x.forEach((v, i) => {
        if (v === null || v < x0 || v > x1) return;
        const first = i > 0 ? line.step[i - 1] + 1 : line.step[i];
        lo = Math.min(lo, first); hi = Math.max(hi, line.step[i]);
      });
    }
    return lo <= hi ? [lo, hi] : null;
  }

  png(title) {
    const source = this.plot.ctx.canvas, ratio = source.width / this.plot.width;
    const legendH = 22 * ratio, titleH = 30 * ratio;
    const canvas = document.createElement("canvas");
    canvas.width = source.width; canvas.height = source.height + titleH + legendH;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#171a21"; ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = "#e6e8ee"; ctx.font = `600 ${14 * ratio}px system-ui, sans-serif`;
    ctx.fillText(shorten(title, 90), 10 * ratio, 20 * ratio);
    ctx.drawImage(source, 0, titleH);
    let x = 10 * ratio;
    ctx.font = `${12 * ratio}px system-ui, sans-serif`;
    for (const line of this.lines) {
      ctx.fillStyle = line.color; ctx.fillRect(x, source.height + titleH + 6 * ratio, 10 * ratio, 10 * ratio);
      const label = shorten(line.label, 60);
      ctx.fillStyle = "#c9cdd8"; ctx.fillText(label, x + 14 * ratio, source.height + titleH + 15 * ratio);
      x += ctx.measureText(label).width + 30 * ratio;
    }
    return new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
  }
};
