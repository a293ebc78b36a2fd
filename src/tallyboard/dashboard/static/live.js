// Live pages without polling: one EventSource per page on /api/stream. The server sends only what
// is new (points, images, texts, run status); a reconnect resumes after the last event (the browser
// sends Last-Event-ID), and a `reset` means the page must reload what it shows.

// `?live=0` in a page's address: no stream and no tail of the console, so the page reaches network
// idle (screenshots, printing, crawlers); it shows what was logged when it loaded.
export const following = new URLSearchParams(location.search).get("live") !== "0";

// `query`: what to follow (runs, table); `update(data)` gets each update, `reset()` a reset, and
// `status(runs)` may return a word ("finished") that ends following and shows in the indicator.
// `ready` resolves once the server follows the runs (or the stream failed): what a page loads after
// it misses no point, as every later one arrives as an update.
export function live(query, { update, reset, status }) {
  const indicator = document.getElementById("live");
  const show = (text, on) => { indicator.className = on ? "live" : "live off"; indicator.textContent = text; };
  if (!following) { show("not live (?live=0)", false); return { stop: () => {}, ready: Promise.resolve() }; }
  const source = new EventSource(`/api/stream?${new URLSearchParams(query)}`);
  const stop = () => source.close();
  let opened = null;
  const ready = new Promise((resolve) => { opened = resolve; });
  source.addEventListener("open", () => { show("live", true); opened(); });
  source.addEventListener("error", () => {
    show(source.readyState === EventSource.CLOSED ? "offline" : "reconnecting…", false);
    opened(); // no stream to wait for: charts load without it
  });
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
  return { stop, ready };
}
