// Many charts on one page (a run's, or the compare page's): grouped (collapsible), filtered by a
// search box (text or regex), pinned charts on top, and each chart drawn only when it scrolls into
// view, so a run with 500 tags does not ask for 500 series at once. The layout (pins, collapsed
// groups, search) is kept per result table and page in localStorage.
import { el } from "./common.js";
import { chartMatcher } from "./chart-names.js";

// A chart card for a board: its head (the metric, then the page's buttons) and, once drawn, a chart.
export function chartCard(metric, dataset, ...buttons) {
  return el("div", { class: "card chart-card", dataset: { metric, ...dataset } },
    el("div", { class: "head" }, el("h4", { title: metric }, metric), ...buttons));
}

export class ChartBoard {
  // `parent` holds the charts, `toolbar` the search box; `grouped` shows the groups' heads; `page`
  // names the layout kept (a run page's and a compare page's charts have different keys).
  constructor(parent, { toolbar, grouped, page = "" }) {
    this.grouped = grouped;
    const table = document.querySelector('meta[name="table-id"]');
    this.storageKey = `tallyboard.layout.${table ? table.content : "default"}${page ? `.${page}` : ""}`;
    this.layout = { pinned: [], collapsed: [], query: "", regex: false, ...this.read() };
    this.cards = new Map(); // key -> { key, group, body, onShow, shown }
    this.groups = new Map(); // group -> { section, grid, count }
    this.observer = new IntersectionObserver((entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        const card = this.cards.get(entry.target.dataset.boardKey);
        this.observer.unobserve(entry.target);
        if (card && !card.shown) { card.shown = true; card.onShow(); }
      }
    }, { rootMargin: "300px" });
    this.search = el("input", { type: "search", id: "chart-search", class: "filter", value: this.layout.query,
      placeholder: "search charts", title: "substring, or a regular expression with .*", oninput: () => this.changed() });
    this.regex = el("input", { type: "checkbox", id: "chart-regex", checked: this.layout.regex, onchange: () => this.changed() });
    this.error = el("span", { class: "error", id: "chart-search-error" });
    this.count = el("span", { class: "muted", id: "chart-count" });
    this.pinnedSection = this.section("pinned", "Pinned");
    this.tools = el("div", { class: "board-tools" }, this.search,
      el("label", { title: "treat the search as a regular expression" }, this.regex, ".*"), this.error, this.count);
    this.root = el("div", { class: grouped ? "board" : "board flat" }, this.pinnedSection.section);
    toolbar.append(this.tools);
    parent.append(this.root);
  }

  read() {
    try { return JSON.parse(localStorage.getItem(this.storageKey)) || {}; } catch (e) { return {}; }
  }

  save() {
    try { localStorage.setItem(this.storageKey, JSON.stringify(this.layout)); } catch (e) { /* storage off: not kept */ }
  }

  section(group, title) {
    const grid = el("div", { class: "charts" });
    const count = el("span", { class: "muted" });
    const head = el("button", { class: "group-head", onclick: () => this.toggle(group) }, el("span", { class: "caret" }), title, count);
    const section = el("section", { class: "chart-group", dataset: { group } }, head, grid);
    const entry = { section, grid, count };
    this.setCollapsed(entry, this.layout.collapsed.includes(group));
    return entry;
  }

  setCollapsed(entry, collapsed) {
    entry.section.classList.toggle("collapsed", collapsed);
    entry.grid.hidden = collapsed;
  }

  toggle(group) {
    const collapsed = !this.layout.collapsed.includes(group);
    this.layout.collapsed = collapsed ? [...this.layout.collapsed, group] : this.layout.collapsed.filter((g) => g !== group);
    this.save();
    this.setCollapsed(group === "pinned" ? this.pinnedSection : this.groups.get(group), collapsed);
  }

  // Adds a chart card (its body built by the page, with a `.head`); `onShow` runs once, when it first scrolls into view.
  add(key, group, body, onShow) {
    if (!this.grouped) group = "charts";
    if (!this.groups.has(group)) {
      const entry = this.section(group, group);
      this.groups.set(group, entry);
      this.root.append(entry.section);
    }
    const card = { key, group, body, onShow, shown: false };
    this.cards.set(key, card);
    body.dataset.boardKey = key;
    const pin = el("button", { class: "pin", title: "pin on top (kept for this table)", onclick: () => this.pin(key) });
    body.querySelector(".head").prepend(pin);
    this.place(card);
    this.observer.observe(body);
    this.filter();
  }

  // Shows the cards in view now rather than when the observer first reports them (a frame or
  // more later): a first screen whose data is at hand draws in the task that built it.
  showInView() {
    for (const card of this.cards.values()) {
      if (card.shown || card.body.hidden) continue;
      const box = card.body.getBoundingClientRect();
      if (!box.height || box.top >= innerHeight || box.bottom <= 0) continue;
      card.shown = true;
      this.observer.unobserve(card.body);
      card.onShow();
    }
  }

  place(card) {
    const pinned = this.layout.pinned.includes(card.key);
    card.body.classList.toggle("pinned", pinned);
    card.body.querySelector("button.pin").textContent = pinned ? "★" : "☆";
    (pinned ? this.pinnedSection : this.groups.get(card.group)).grid.append(card.body);
  }

  pin(key) {
    const pinned = this.layout.pinned.includes(key);
    this.layout.pinned = pinned ? this.layout.pinned.filter((k) => k !== key) : [...this.layout.pinned, key];
    this.save();
    const card = this.cards.get(key);
    this.place(card);
    if (!card.shown) { this.observer.unobserve(card.body); this.observer.observe(card.body); }
    this.filter();
  }

  changed() {
    this.layout.query = this.search.value;
    this.layout.regex = this.regex.checked;
    this.save();
    this.filter();
  }

  filter() {
    const { test, error } = chartMatcher(this.layout.query, this.layout.regex);
    this.error.textContent = error;
    this.search.classList.toggle("bad", Boolean(error));
    const visible = new Map();
    let shown = 0;
    for (const card of this.cards.values()) {
      const match = test(card.key);
      card.body.hidden = !match;
      const where = card.body.classList.contains("pinned") ? "pinned" : card.group;
      visible.set(where, (visible.get(where) || 0) + (match ? 1 : 0));
      shown += match ? 1 : 0;
    }
    for (const [group, entry] of [["pinned", this.pinnedSection], ...this.groups]) {
      const n = visible.get(group) || 0;
      entry.count.textContent = ` ${n}`;
      entry.section.hidden = n === 0;
    }
    this.count.textContent = `${shown} of ${this.cards.size} charts`;
  }
}
