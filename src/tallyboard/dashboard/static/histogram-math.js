// The arithmetic of the Histograms tab's heat map: each logged histogram's buckets spread over
// ROWS equal value rows, so steps with different bucket edges line up. Pure; tests/js runs it.

export const ROWS = 96; // value rows of the heat map: each step's buckets are spread over these

// Spread one histogram's buckets over ROWS equal value rows between lo and hi, by overlap.
export function resample(h, lo, hi) {
  const rows = new Float64Array(ROWS);
  const span = hi - lo || 1;
  h.counts.forEach((count, i) => {
    if (!count) return;
    const a = h.edges[i], b = h.edges[i + 1];
    const first = Math.min(ROWS - 1, Math.max(0, Math.floor(((a - lo) / span) * ROWS)));
    const last = Math.min(ROWS - 1, Math.max(0, Math.floor(((b - lo) / span) * ROWS)));
    if (first === last || b === a) { rows[first] += count; return; }
    for (let r = first; r <= last; r++) {
      const top = lo + ((r + 1) / ROWS) * span, bottom = lo + (r / ROWS) * span;
      rows[r] += (count * Math.max(0, Math.min(b, top) - Math.max(a, bottom))) / (b - a);
    }
  });
  return rows;
}
