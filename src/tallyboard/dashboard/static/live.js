// Live pages without polling: one EventSource per page on /api/stream. The server sends only what
// is new (points, images, texts, run status); a reconnect resumes after the last event (the browser
// sends Last-Event-ID), and a `reset` means the page must reload what it shows.
"use strict";

TB.live = (query, { update, reset, status }) => {
  const indicator = document.getElementById("live");
  const show = (text, on) => { indicator.className = on ? "live" : "live off"; indicator.textContent = text; };
  const source = new EventSource(`/api/stream?${new URLSearchParams(query)}`);
  const stop = () => source.close();
  source.addEventListener("open", () => show("live", true));
  source.addEventListener("error", () => show(source.readyState === EventSource.CLOSED ? "offline" : "reconnecting…", false));
  source.addEventListener("update", (event) => {
    const data = JSON.parse(event.data);
    show("live", true);
    update(data);
    if (status) {
      const text = status(data.runs || []);
      if (text) { show(text, false); stop(); }
    }
  });
  source.addEventListener("reset", () => reset());
  return { stop };
};

// Appends the points of a live update to a series the page holds; only steps after its last one,
// so a point that both a chart's load and an update carry is drawn once.
TB.appendPoints = (series, fresh) => {
  const from = fresh.step.findIndex((step) => step > series.last_step);
  if (from < 0) return false;
  for (const k of ["step", "epoch", "wall", "value", "min", "max"]) series[k].push(...fresh[k].slice(from));
  series.last_step = fresh.last_step;
  return true;
};
