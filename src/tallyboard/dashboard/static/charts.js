// Charts on top of uPlot (vendored, loaded as a classic script before the page's modules):
// smoothing, bands, x modes, zoom that re-queries, PNG export. The numbers are series-math.js's.
import { debounce, el, format, number, shorten, swatch, thousands, time, duration } from "./common.js";
import { MAX_NAME } from "./chart-names.js";
import { clampToBand, ema, nonFinite, smoothingWeight, stepRange, xOf, xTitle } from "./series-math.js";

const uPlot = globalThis.uPlot;

// What a card says instead of a chart when the metric's name is too long to ask the API for.
export const tooLong = (name) => el("div", { class: "empty-state too-long" },
  `This metric's name is ${thousands(name.length)} characters long: charts and CSV exports take names of up to ${thousands(MAX_NAME)}.`);

function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

export class Chart {
  constructor(container, { onZoom } = {}) {
    this.container = container;
    this.onZoom = onZoom;
    this.plot = null;
    this.lines = [];
    this.settings = { x: "step", smoothing: 0, logY: false, bands: true, yTitle: "" };
    this.readout = el("div", { class: "readout" });
    this.area = el("div", { class: "plot" });
    this.note = el("div", { class: "chart-note" });
    this.legend = el("div", { class: "legend" });
    container.append(this.area, this.readout, this.note, this.legend);
    this.width = 0;
    this.resizer = new ResizeObserver(debounce(() => {
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
      const x = xOf(line, mode);
      x.forEach((v) => v !== null && xs.add(v));
      return x;
    });
    const xAll = Float64Array.from([...xs].sort((a, b) => a - b));
    const index = new Map();
    xAll.forEach((v, i) => index.set(v, i));
    const clean = (v) => {
      v = number(v);
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
      const hasBand = line.min.some((v, i) => number(v) !== number(line.max[i]));
      if (hasBand && showBands) {
        data.push(low, high);
        const lowIdx = data.length - 2, highIdx = data.length - 1;
        series.push({ label: `${line.label} min`, stroke: "transparent", points: { show: false }, spanGaps: true },
          { label: `${line.label} max`, stroke: "transparent", points: { show: false }, spanGaps: true });
        bands.push({ series: [highIdx, lowIdx], fill: alpha(line.color, 0.16) });
      }
      const logged = raw.filter((v) => v !== null).length * Math.max(1, line.bucket || 1); // points behind the buckets
      const weight = smoothingWeight(smoothing, logged);
      const smooth = weight > 0;
      data.push(raw);
      series.push({ label: line.label, stroke: smooth ? alpha(line.color, 0.28) : line.color, width: smooth ? 1 : 1.75,
        spanGaps: true, points: { show: raw.filter((v) => v !== null).length < 3 }, dash: line.dash });
      if (smooth) {
        const values = raw.filter((v) => v !== null);
        const smoothed = ema(values, weight);
        const full = spread();
        let k = 0;
        raw.forEach((v, i) => { if (v !== null) full[i] = clampToBand(smoothed[k++], low[i], high[i]); });
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
    this.legend.replaceChildren(...this.lines.map((line) => el("span", {}, swatch(line.color), line.label)));
    // Exposed for tests and scripts: how many lines and points this chart shows.
    this.container.dataset.lines = this.lines.length;
    this.container.dataset.points = this.lines.reduce((n, line) => n + line.step.length, 0);
    const dropped = this.lines.reduce((n, line) => n + (line.dropped ?? nonFinite(line.value)), 0);
    this.container.dataset.nonfinite = dropped;
    this.note.textContent = dropped ? `${thousands(dropped)} non-finite value${dropped === 1 ? "" : "s"} (NaN or ±inf) left out: gaps in the line` : "";
    if (!this.lines.length) { this.area.replaceChildren(el("div", { class: "empty-state" }, "no points")); return; }
    this.area.replaceChildren();
    const { data, series, bands } = this.build();
    this.container.dataset.bands = bands.length;
    this.container.dataset.smoothed = series.filter((s) => s.label && s.label.endsWith(" (smoothed)")).length;
    const mode = this.settings.x;
    this.xTitle = xTitle(this.lines, mode);
    this.container.dataset.x = this.xTitle; // for tests and scripts: what the x axis says it is
    const axisColor = "#8b93a7", grid = { stroke: "#ffffff10", width: 1 };
    const xValues = mode === "relative" ? (u, ticks) => ticks.map((t) => duration(t)) : undefined;
    const opts = {
      width, height: 250, series, bands,
      legend: { show: false },
      cursor: { drag: { x: true, y: false }, points: { size: 6 } },
      scales: { x: { time: mode === "wall" }, y: { distr: this.settings.logY ? 3 : 1 } },
      axes: [
        { stroke: axisColor, grid, ticks: grid, values: xValues, label: this.xTitle, labelSize: 22,
          labelFont: "12px system-ui, sans-serif" },
        { stroke: axisColor, grid, ticks: grid, size: 56, label: shorten(this.settings.yTitle, 48), labelSize: 22,
          labelFont: "12px system-ui, sans-serif", values: (u, ticks) => ticks.map((t) => format(t)) },
      ],
      hooks: {
        setSelect: [(u) => {
          if (u.select.width < 4) return;
          const x0 = u.posToVal(u.select.left, "x"), x1 = u.posToVal(u.select.left + u.select.width, "x");
          u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
          const range = stepRange(this.lines, this.settings.x, x0, x1);
          if (range && this.onZoom) this.onZoom(range);
        }],
        setCursor: [(u) => this.showReadout(u)],
        // For benchmarks (bench/dashboard_chromium.py): when the page's first chart was drawn.
        draw: [() => { if (!performance.getEntriesByName("tallyboard:first-chart").length) performance.mark("tallyboard:first-chart"); }],
      },
    };
    this.plot = new uPlot(opts, data, this.area);
    this.plot.over.addEventListener("dblclick", () => this.onZoom && this.onZoom(null));
  }

  showReadout(u) {
    const i = u.cursor.idx;
    if (i === null || i === undefined) { this.readout.textContent = ""; return; }
    const x = u.data[0][i];
    const xText = this.settings.x === "wall" ? time(x) : this.settings.x === "relative" ? duration(x) : format(x);
    const parts = [`${this.xTitle} ${xText}`];
    u.series.forEach((s, k) => { if (s.main && u.data[k][i] !== null) parts.push(`${s.label.replace(" (smoothed)", "")}: ${format(u.data[k][i])}`); });
    this.readout.textContent = parts.join("   ");
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
}
