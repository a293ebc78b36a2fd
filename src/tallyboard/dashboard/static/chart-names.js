// Rules on metric names that decide where a chart goes: its group on a board, whether a search
// shows it, the order of splits, and whether the API can be asked for it. Pure; tests/js runs them.

export const MAX_NAME = 4000; // characters of a metric or tag name the API takes in a query
export const nameTooLong = (name) => name.length > MAX_NAME || encodeURIComponent(name).length > 3 * MAX_NAME;

export const GROUP_MIN = 9; // charts from which a run's board shows groups; fewer sit in one grid

// A run page's group: "grad/w1" groups under "grad"; a plain metric under its splits ("train · val", "sys").
export function chartGroup(metric, splits) {
  const slash = metric.indexOf("/");
  if (slash > 0) return metric.slice(0, slash);
  const named = [...new Set(splits)].filter(Boolean).sort();
  return named.length ? named.join(" · ") : "other";
}

// A compare page's group: the split (one chart per split and metric), then the metric's prefix.
export function splitGroup(split, metric) {
  const slash = metric.indexOf("/");
  const base = split || "(no split)";
  return slash > 0 ? `${base} / ${metric.slice(0, slash)}` : base;
}

// Splits in reading order: train, then validation, then test, then the rest by name.
const splitRank = (split) => ({ train: 0, val: 1, valid: 1, validation: 1, test: 2 }[split] ?? 3);
export const bySplit = (a, b) => splitRank(a) - splitRank(b) || (a > b) - (a < b);

// A search box's test: case-insensitive substring, or a regex; an invalid regex is reported, not applied.
export function chartMatcher(text, regex) {
  if (!text) return { test: () => true, error: "" };
  if (!regex) { const needle = text.toLowerCase(); return { test: (name) => name.toLowerCase().includes(needle), error: "" }; }
  try { const pattern = new RegExp(text, "i"); return { test: (name) => pattern.test(name), error: "" }; }
  catch (e) { return { test: () => true, error: `invalid regex: ${e.message}` }; }
}
