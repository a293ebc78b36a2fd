// How the API's values are read and written for people. Pure functions (no DOM): the pages import
// them through common.js, and tests/js runs them under node.

// The API writes non-finite floats as the strings "NaN", "Infinity" and "-Infinity" (JSON has no
// such numbers); everything else is passed through.
export function number(value) {
  if (value === "NaN") return NaN;
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  return value;
}

export function format(value) {
  if (value === null || value === undefined || value === "") return "";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    const abs = Math.abs(value);
    return abs !== 0 && (abs < 1e-3 || abs >= 1e6) ? value.toExponential(3) : String(+value.toPrecision(5));
  }
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
  seconds = Math.max(0, Math.round(seconds));
  const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  return h ? `${h}h ${String(m).padStart(2, "0")}m` : m ? `${m}m ${String(s).padStart(2, "0")}s` : `${s}s`;
}

export function shorten(text, most) {
  return text.length > most ? `${text.slice(0, most - 1)}…` : text;
}

// A name made safe for a downloaded file's name.
export const fileName = (name) => shorten(name, 80).replace(/[^\w.-]+/g, "_");

// A count with its thousands grouped ("95,000"), written without Intl: a page's first
// `toLocaleString` costs Chromium 30-45 ms (it loads its locale data), in the task that draws it.
export const thousands = (count) => String(count).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
