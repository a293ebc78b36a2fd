// The numbers behind a chart: the API's compact series decoded, smoothing, the mean and band of repetitions over merged buckets,
// live points appended to a loaded series, x values and zoom ranges. Pure functions on the API's
// series objects ({step, epoch, wall, value, min, max, last_step, start_time}); no DOM, so
// tests/js checks them under node.
import { number } from "./values.js";

// A series as the API sends it (compact: steps as {first, stride, count} where they are regular and as
// differences where not, wall times as differences of milliseconds, no epoch, min or max arrays where
// they would say nothing) as
// the arrays the charts read: step, epoch, wall (seconds since its start), value, min and max. A live
// update without points (`new` or `more`) comes back as it is. A point's own min and max are its
// value, but a NaN point has none (null), as the API says of a bucket of NaN only.
const extreme = (v) => (v === "NaN" ? null : v);
const summed = (deltas) => { let at = 0; return deltas.map((d) => (at += d)); };
export function decodeSeries(s) {
  if (!s.value) return s;
  const n = s.value.length, { wall_ms: deltas, ...rest } = s;
  const step = Array.isArray(s.step) ? summed(s.step) : Array.from({ length: s.step.count }, (_, i) => s.step.first + i * s.step.stride);
  const wall = summed(deltas).map((ms) => ms / 1000);
  return { ...rest, step, wall, epoch: s.epoch || new Array(n).fill(null),
    min: s.min || s.value.map(extreme), max: s.max || s.value.map(extreme) };
}

// Debiased exponential moving average (as TensorBoard's "smoothing"): no pull towards 0 at the start.
// Gaps (null, NaN, +-inf) stay gaps and do not move the average.
export function ema(values, weight) {
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
}

// Default smoothing ("auto"): this weight, and only for lines of at least SMOOTH_MIN logged points;
// a short series is drawn as logged (smoothing 20 points hides half of a divergence).
export const AUTO_SMOOTHING = 0.6;
export const SMOOTH_MIN = 300;

// The weight a line is smoothed with: `smoothing` is "auto" or a number in [0, 1).
export function smoothingWeight(smoothing, loggedPoints) {
  if (smoothing === "auto") return loggedPoints >= SMOOTH_MIN ? AUTO_SMOOTHING : 0;
  return smoothing;
}

// A smoothed value kept inside its bucket's min-max: a lagging average must not draw where no value was.
export function clampToBand(value, low, high) {
  return low === null || high === null ? value : Math.min(Math.max(value, low), high);
}

// Values a chart cannot place (NaN, +-inf): left out as gaps, counted for the chart's note. Every
// entry of a series is a logged point, so an empty value is a NaN (the store keeps NaN as NULL).
export const nonFinite = (values) => values.reduce((n, v) => n + (Number.isFinite(number(v)) ? 0 : 1), 0);

// A line's x values for an x-axis mode: step, epoch, wall (seconds since 1970) or relative (since its start).
export function xOf(line, mode) {
  if (mode === "epoch") return line.epoch.map((e) => (e === null ? null : e));
  if (mode === "wall") return line.wall.map((w) => line.start_time + w);
  if (mode === "relative") return line.wall.slice();
  return line.step.slice();
}

// What a chart's x axis is, said on it: by step, "window" when every line's steps count the
// windows of a monitor Stat (the API's `axis`), "epoch" when every point of every line was logged
// at its epoch as its step (`add_scalar(..., step=epoch, epoch=epoch)`: the step axis counts
// epochs), else "step"; the time modes say which time.
const X_TITLES = { step: "step", epoch: "epoch", wall: "wall time", relative: "time since start" };
export function xTitle(lines, mode) {
  if (mode !== "step") return X_TITLES[mode] || mode;
  if (lines.length && lines.every((l) => l.axis === "window")) return "window";
  const byEpoch = lines.some((l) => l.step.length) && lines.every((l) => l.step.every((s, i) => l.epoch[i] === s));
  return byEpoch ? "epoch" : "step";
}

// Mean and band (min-max, or mean +- population std with "std") of lines grouped by `keyOf`. Lines
// of one request share bucket boundaries (`lo` + k * `bucket`), so their points merge per bucket;
// with `bucket` 1 they merge per step. Non-finite values are left out and counted in `dropped`.
export function aggregate(lines, keyOf, bandMode, lo, bucket) {
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
        const v = number(line.value[i]);
        if (v === null || !isFinite(v)) return;
        if (!buckets.has(b)) buckets.set(b, { step, epoch: line.epoch[i], wall: line.wall[i], values: [] });
        buckets.get(b).values.push(v);
      });
    }
    const keys = [...buckets.keys()].sort((a, b) => a - b);
    const agg = { ...members[0], key: `group:${key}`, label: key, members: members.length,
      axis: members.every((line) => line.axis === "window") ? "window" : undefined,
      step: [], epoch: [], wall: [], value: [], min: [], max: [],
      dropped: members.reduce((n, line) => n + nonFinite(line.value), 0) };
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
}

// Appends the points of a live update to a series the page holds; only steps after its last one,
// so a point that both a chart's load and an update carry is drawn once. False when nothing was new.
export function appendPoints(series, fresh) {
  const from = fresh.step.findIndex((step) => step > series.last_step);
  if (from < 0) return false;
  for (const k of ["step", "epoch", "wall", "value", "min", "max"]) series[k].push(...fresh[k].slice(from));
  series.last_step = fresh.last_step;
  return true;
}

// Steps covered by an x range [x0, x1] of the lines, so a zoom can ask the server for that range at
// full resolution: a bucketed point stands for the steps after the previous point up to its own.
export function stepRange(lines, mode, x0, x1) {
  let lo = Infinity, hi = -Infinity;
  for (const line of lines) {
    const x = xOf(line, mode);
    x.forEach((v, i) => {
      if (v === null || v < x0 || v > x1) return;
      const first = i > 0 ? line.step[i - 1] + 1 : line.step[i];
      lo = Math.min(lo, first); hi = Math.max(hi, line.step[i]);
    });
  }
  return lo <= hi ? [lo, hi] : null;
}
