// The chart settings every page with charts has in its sidebar: smoothing, x axis, log scale. They
// live in the page's URL state (common.readState) under the same keys on every page.
import { el } from "./common.js";
import { AUTO_SMOOTHING, SMOOTH_MIN } from "./series-math.js";

export const CHART_DEFAULTS = { smooth: "auto", x: "step", log: "0" };
const X_MODES = [["step", "Step"], ["epoch", "Epoch"], ["wall", "Wall time"], ["relative", "Relative time"]];

// The Chart settings these keys stand for (a page adds its own band and title).
export const chartSettings = (state) => ({ x: state.x, smoothing: state.smooth === "auto" ? "auto" : Number(state.smooth), logY: state.log === "1" });

// A select bound to `state[key]`: `change(changes)` saves and redraws.
export function stateSelect(id, state, key, options, change) {
  return el("select", { id, onchange: (e) => change({ [key]: e.target.value }) },
    options.map(([v, t]) => el("option", { value: v, selected: state[key] === v }, t)));
}

// The smoothing slider: "auto" (the default) until it is moved, then the chosen weight.
function smoothingControl(value, onChange) {
  const auto = value === "auto";
  const slider = el("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: auto ? AUTO_SMOOTHING : value, id: "smoothing" });
  const label = el("span", { class: "muted", id: "smoothing-label",
    title: `auto: ${AUTO_SMOOTHING} for series of ${SMOOTH_MIN} points or more, none below` },
  auto ? "auto" : Number(value).toFixed(2));
  slider.addEventListener("input", () => { label.textContent = Number(slider.value).toFixed(2); onChange(slider.value); });
  return el("div", {}, el("label", {}, "Smoothing", label), slider);
}

// The sidebar's controls for smoothing, x axis and log scale; `change(changes)` saves and redraws.
export function chartControls(state, change) {
  return [
    smoothingControl(state.smooth, (value) => change({ smooth: value })),
    el("label", {}, "X axis", stateSelect("x-axis", state, "x", X_MODES, change)),
    el("label", {}, "Log scale", el("input", { type: "checkbox", id: "log-y", checked: state.log === "1",
      onchange: (e) => change({ log: e.target.checked ? "1" : "0" }) })),
  ];
}
