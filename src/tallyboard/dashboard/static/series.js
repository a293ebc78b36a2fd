// The series behind a page's charts, one entry per metric for all the page's runs: loaded from
// /api/series when a chart of the metric is first seen (at that chart's width), loaded again for
// a zoom, and grown by live updates (live.js). The run page and the compare page share it; each
// draws an entry its own way.
import { firstAnswer, getJSON } from "./common.js";
import { appendPoints, decodeSeries } from "./series-math.js";

export class MetricSeries {
  // `draw(entry)` shows an entry after a change; `width(entry)` is the pixel width to load it for.
  constructor(runIds, { draw, width }) {
    this.runIds = runIds;
    this.draw = draw;
    this.width = width;
    this.entries = new Map(); // metric -> { metric, series, lo, bucket, range, loaded, pending }
    // Loads wait for this: a live page sets the stream's `ready` (live.js), so no point logged
    // between a load and the stream's start is missed.
    this.ready = Promise.resolve();
    this.settled = false; // true where the page follows no live updates (a finished run, ?live=0)
  }

  entry(metric) {
    if (!this.entries.has(metric)) {
      this.entries.set(metric, { metric, series: [], lo: 0, bucket: 1, range: null, loaded: false, pending: null });
    }
    return this.entries.get(metric);
  }

  // The series of an entry that a live point belongs to, if it holds it.
  held(entry, fresh) {
    return entry.series.find((s) => s.run_id === fresh.run_id && s.tag_id === fresh.tag_id && s.rep === fresh.rep);
  }

  // Loads an entry (a step range for a zoom, or null for all of it) and draws it. A series the
  // server wrote into the page (common.js `firstAnswer`) at this width or wider is drawn at once;
  // where the page follows live updates, the entry then loads again once the stream is ready, so
  // no point logged since the page was made is missed (`settled`: nothing more can arrive).
  async load(entry, range) {
    const width = Math.max(200, Math.round(this.width(entry) || 600));
    const query = new URLSearchParams({ runs: this.runIds.join(","), metric: entry.metric, width });
    if (range) { query.set("step_min", range[0]); query.set("step_max", range[1]); }
    const first = range ? undefined : firstAnswer(`/api/series?${query}`, (asked, inlined) => asked.size === inlined.size
      && [...asked].every(([key, value]) => (key === "width" ? +inlined.get(key) >= +value : inlined.get(key) === value)));
    if (first) {
      this.apply(entry, first, null);
      this.draw(entry);
      if (this.settled) return;
    }
    entry.pending = []; // live points that arrive while this request runs: applied after it
    await this.ready;
    this.apply(entry, await getJSON(`/api/series?${query}`), range);
    const pending = entry.pending;
    entry.pending = null;
    if (pending.some((f) => f.new || f.more || !this.held(entry, f))) { this.load(entry, range); return; } // changed while loading
    if (!range) pending.forEach((fresh) => appendPoints(this.held(entry, fresh), fresh));
    this.draw(entry);
  }

  apply(entry, data, range) {
    Object.assign(entry, { series: data.series.map(decodeSeries), lo: data.lo, bucket: data.bucket, range, loaded: true });
  }

  // Applies the series of a live update: points join loaded lines; a new series, or more points
  // than an update carries, loads its metric again; a zoomed chart stays put (its reset shows the
  // new points); metrics never loaded are left to load fresh when seen. Returns the metrics the
  // page has no entry for (logged for the first time).
  update(freshSeries) {
    const touched = new Set(), unknown = [];
    for (const fresh of freshSeries.map(decodeSeries)) {
      const entry = this.entries.get(fresh.metric);
      if (!entry) { unknown.push(fresh); continue; }
      if (entry.pending) { entry.pending.push(fresh); continue; } // loading now
      if (!entry.loaded) continue;
      const series = this.held(entry, fresh);
      if (!series || fresh.new || fresh.more) { this.load(entry, entry.range); continue; }
      if (!entry.range && appendPoints(series, fresh)) touched.add(entry);
    }
    touched.forEach((entry) => this.draw(entry));
    return unknown;
  }

  // After a `reset` from the stream: every loaded entry loads again.
  reload() {
    for (const entry of this.entries.values()) if (entry.loaded) this.load(entry, entry.range);
  }
}
