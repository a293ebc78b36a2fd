// The run page's Histograms tab: a heat map of one tag's distribution over steps (one column per
// logged step, value on the vertical axis, shade = share of that step's values), and the buckets of
// one step as bars. Drawn on canvas; every user string enters the DOM via textContent (TB.el).
import * as TB from "./common.js";
import { ROWS, resample } from "./histogram-math.js";

const { el } = TB;
const COLORS = { bg: "#11141a", ink: "#8b93a7", bar: "#5b9cff" };

function canvas(id, height) {
  const node = el("canvas", { id, class: "card hist-canvas", height, width: 900 });
  node.style.width = "100%"; node.style.height = `${height}px`;
  return node;
}

function text(ctx, value, x, y, align) {
  ctx.fillStyle = COLORS.ink; ctx.font = "12px sans-serif"; ctx.textAlign = align; ctx.fillText(value, x, y);
}

// Columns are the logged steps in order; a column's shade is its rows' share of its largest row.
function drawHeatmap(node, hs, selected) {
  const ctx = node.getContext("2d"), W = node.width, H = node.height, left = 70, bottom = 22;
  ctx.fillStyle = COLORS.bg; ctx.fillRect(0, 0, W, H);
  const filled = hs.filter((h) => h.count > 0);
  if (!filled.length) return;
  const lo = Math.min(...filled.map((h) => h.min)), hi = Math.max(...filled.map((h) => h.max));
  const width = (W - left) / hs.length, rowHeight = (H - bottom) / ROWS;
  hs.forEach((h, column) => {
    if (!h.count) return;
    const rows = resample(h, lo, hi), peak = Math.max(...rows) || 1;
    rows.forEach((value, r) => {
      if (!value) return;
      ctx.fillStyle = `rgba(91, 156, 255, ${Math.min(1, 0.08 + (0.92 * value) / peak)})`;
      ctx.fillRect(left + column * width, H - bottom - (r + 1) * rowHeight, Math.max(1, width), Math.ceil(rowHeight));
    });
  });
  ctx.strokeStyle = "#f5a524"; ctx.lineWidth = 2;
  ctx.strokeRect(left + selected * width, 0, Math.max(2, width), H - bottom);
  text(ctx, TB.format(hi), left - 6, 12, "right");
  text(ctx, TB.format(lo), left - 6, H - bottom, "right");
  text(ctx, `step ${hs[0].step}`, left, H - 6, "left");
  text(ctx, `step ${hs[hs.length - 1].step}`, W - 4, H - 6, "right");
}

function drawBars(node, h) {
  const ctx = node.getContext("2d"), W = node.width, H = node.height, left = 70, bottom = 22;
  ctx.fillStyle = COLORS.bg; ctx.fillRect(0, 0, W, H);
  if (!h.count) { text(ctx, "no finite values at this step", W / 2, H / 2, "center"); return; }
  const peak = Math.max(...h.counts), lo = h.edges[0], span = h.edges[h.edges.length - 1] - lo || 1;
  ctx.fillStyle = COLORS.bar;
  h.counts.forEach((count, i) => {
    const x = left + ((h.edges[i] - lo) / span) * (W - left);
    const w = h.counts.length === 1 ? W - left : ((h.edges[i + 1] - h.edges[i]) / span) * (W - left);
    const height = (count / peak) * (H - bottom - 8);
    ctx.fillRect(x, H - bottom - height, Math.max(1, w - 1), height);
  });
  text(ctx, String(peak), left - 6, 14, "right");
  text(ctx, TB.format(h.min), left, H - 6, "left");
  text(ctx, TB.format(h.max), W - 4, H - 6, "right");
}

function stats(h) {
  const mean = h.count ? h.sum / h.count : null;
  const std = h.count ? Math.sqrt(Math.max(0, h.sum_squares / h.count - mean * mean)) : null;
  const parts = [`step ${h.step}`, h.epoch !== null ? `epoch ${h.epoch}` : null, `count ${h.count}`,
    `min ${TB.format(h.min)}`, `max ${TB.format(h.max)}`, `mean ${TB.format(mean)}`, `std ${TB.format(std)}`,
    h.nonfinite ? `NaN/inf ${h.nonfinite}` : null];
  return parts.filter((p) => p !== null).join(" · ");
}

export async function show(body, runId, tag) {
  const data = await TB.getJSON(`/api/runs/${runId}/histograms${tag ? `?tag=${encodeURIComponent(tag)}` : ""}`);
  body.replaceChildren();
  if (!data.tags.length) { body.append(el("div", { class: "empty-state" }, "no histograms logged")); return; }
  const tagSel = el("select", { id: "hist-tag", onchange: () => show(body, runId, tagSel.value) },
    data.tags.map((t) => el("option", { value: t, selected: t === data.tag }, t)));
  const reps = [...new Set(data.histograms.map((h) => h.rep))];
  const repSel = el("select", { id: "hist-rep" }, reps.map((r) => el("option", { value: String(r) }, `rep ${r}`)));
  const slider = el("input", { type: "range", id: "hist-step", min: 0, value: 0 });
  const heat = canvas("hist-heatmap", 260), bars = canvas("hist-bars", 200);
  const info = el("div", { id: "hist-stats", class: "mono muted" });
  let hs = [];
  const redraw = () => {
    const index = Number(slider.value);
    drawHeatmap(heat, hs, index); drawBars(bars, hs[index]); info.textContent = stats(hs[index]);
  };
  const pickRep = () => {
    hs = data.histograms.filter((h) => String(h.rep) === repSel.value);
    slider.max = String(hs.length - 1); slider.value = String(hs.length - 1); redraw();
  };
  heat.addEventListener("click", (e) => {
    const box = heat.getBoundingClientRect(), left = (70 / heat.width) * box.width;
    const column = Math.floor(((e.clientX - box.left - left) / (box.width - left)) * hs.length);
    if (column >= 0 && column < hs.length) { slider.value = String(column); redraw(); }
  });
  slider.addEventListener("input", redraw);
  repSel.addEventListener("change", pickRep);
  body.append(el("div", { class: "toolbar" }, tagSel, repSel, el("span", { class: "slider" }, "step", slider)),
    el("div", { class: "muted" }, "distribution over steps (click a column to pick its step)"), heat,
    el("div", { class: "muted" }, "histogram of the picked step"), bars, info);
  pickRep();
}
