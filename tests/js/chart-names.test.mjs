// Where a chart goes on a board and whether a search shows it (static/chart-names.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { bySplit, chartGroup, chartMatcher, nameTooLong, splitGroup, MAX_NAME } from "../../src/tallyboard/dashboard/static/chart-names.js";

test("a run page groups a chart by its metric's prefix, else by its splits", () => {
  assert.equal(chartGroup("grad/w1", ["train"]), "grad");
  assert.equal(chartGroup("loss", ["val", "train", "train"]), "train · val");
  assert.equal(chartGroup("loss", [null, ""]), "other");
  assert.equal(chartGroup("/odd", ["sys"]), "sys"); // a leading slash is no prefix
});

test("a compare page groups a chart by its split, then its metric's prefix", () => {
  assert.equal(splitGroup("train", "loss"), "train");
  assert.equal(splitGroup("train", "grad/w1"), "train / grad");
  assert.equal(splitGroup(null, "loss"), "(no split)");
});

test("splits read train, validation, test, then the rest by name", () => {
  assert.deepEqual(["zeta", "test", "val", "alpha", "train"].sort(bySplit), ["train", "val", "test", "alpha", "zeta"]);
});

test("search: a substring in any case, or a regex; an invalid regex shows everything and says why", () => {
  assert.equal(chartMatcher("", false).test("anything"), true);
  const text = chartMatcher("LOSS", false);
  assert.deepEqual(["train/loss", "acc"].map(text.test), [true, false]);
  assert.equal(chartMatcher("w.1", false).test("w01"), false); // not a regex unless asked
  const regex = chartMatcher("^w0[0-2]$", true);
  assert.deepEqual(["w00", "w02", "w03", "xw00"].map(regex.test), [true, true, false, false]);
  const bad = chartMatcher("w(", true);
  assert.match(bad.error, /^invalid regex/);
  assert.equal(bad.test("anything"), true);
});

test("a name the API cannot be asked for is too long, counted in characters and in encoded bytes", () => {
  assert.equal(nameTooLong("x".repeat(MAX_NAME)), false);
  assert.equal(nameTooLong("x".repeat(MAX_NAME + 1)), true);
  assert.equal(nameTooLong("é".repeat(2500)), true); // 2,500 characters, 15,000 encoded
});
