// Many charts on one page: grouped by prefix (collapsible), filtered by a search box (text or
// regex), pinned charts on top, and each chart drawn only when it scrolls into view, so a run with
// 500 tags does not ask for 500 series at once. The layout (pins, collapsed groups, search) is kept
// per result table in localStorage.
"use strict";

TB.chartGroup = (metric, splits) => {
  // "grad/w1" groups under "grad"; a plain metric under its splits ("train · val", "sys").
  const slash = metric.indexOf("/");
  if (slash > 0) return metric.slice(0, slash);
  const named = [...new Set(splits)].filter(Boolean).sort();
  return named.length ? named.join(" · ") : "other";
};

// A search box's test: case-insensitive substring, or a regex; an invalid regex is reported, not applied.
TB.chartMatcher = (text, regex) => {
  if (!text) return { test: () => true, error: "" };
  if (!regex) { const needle = text.toLowerCase(); return { test: (name) => name.toLowerCase().includes(needle), error: "" }; }
  try { const pattern = new RegExp(text, "i"); return { test: (name) => pattern.test(name), error: "" }; }
  catch (e) { return { test: () => true, error: `invalid regex: ${e.message}` }; }
};

TB.GROUP_MIN = 9; // charts from which they are grouped; fewer sit in one grid, as they always did

TB.ChartBoard = class {
  // `parent` holds the charts, `toolbar` the search box; `grouped` shows the groups' heads.
  constructor(parent, { toolbar, grouped }) {
    this.grouped = grouped;
    const table = document.querySelector('meta[name="table-id"]');
    this.storageKey = `tallyboard.layout.${table ? table.content : "default"}`;
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
    this.search = TB.el("input", { type: "search", id: "chart-search", class: "filter", value: this.layout.query,
      placeholder: "search charts", title: "substring, or a regular expression with .*", oninput: () => this.changed() });
    this.regex = TB.el("input", { type: "checkbox", id: "chart-regex", checked: this.layout.regex, onchange: () => this.changed() });
    this.error = TB.el("span", { class: "error", id: "chart-search-error" });
    this.count = TB.el("span", { class: "muted", id: "chart-count" });
    this.pinnedSection = this.section("pinned", "Pinned");
    this.tools = TB.el("div", { class: "board-tools" }, this.search,
      TB.el("label", { title: "treat the search as a regular expression" }, this.regex, ".*"), this.error, this.count);
    this.root = TB.el("div", { class: grouped ? "board" : "board flat" }, this.pinnedSection.section);
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
    const grid = TB.el("div", { class: "charts" });
    const count = TB.el("span", { class: "muted" });
    const head = TB.el("button", { class: "group-head", onclick: () => this.toggle(group) }, TB.el("span", { class: "caret" }), title, count);
    const section = TB.el("section", { class: "chart-group", dataset: { group } }, head, grid);
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
    const pin = TB.el("button", { class: "pin", title: "pin on top (kept for this table)", onclick: () => this.pin(key) });
    body.querySelector(".head").prepend(pin);
    this.place(card);
    this.observer.observe(body);
    this.filter();
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
    const { test, error } = TB.chartMatcher(this.layout.query, this.layout.regex);
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
};
