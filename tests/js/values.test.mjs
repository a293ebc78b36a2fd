// How API values are read and shown (static/values.js) and the histogram heat map's rows
// (static/histogram-math.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { duration, fileName, format, number, shorten, thousands } from "../../src/tallyboard/dashboard/static/values.js";
import { resample, ROWS } from "../../src/tallyboard/dashboard/static/histogram-math.js";

test("the API's non-finite strings become numbers; other values pass through", () => {
  assert.ok(Number.isNaN(number("NaN")));
  assert.equal(number("Infinity"), Infinity);
  assert.equal(number("-Infinity"), -Infinity);
  assert.equal(number("nan"), "nan"); // a string hparam stays a string
  assert.equal(number(1.5), 1.5);
});

test("numbers are shown with 5 significant digits, very small or large ones in exponent form", () => {
  assert.equal(format(3), "3");
  assert.equal(format(0.123456789), "0.12346");
  assert.equal(format(0.0001234), "1.234e-4");
  assert.equal(format(12345678.9), "1.235e+7");
  assert.equal(format(0), "0");
  assert.equal(format(null), "");
  assert.equal(format(true), "true");
  assert.equal(format({ a: [1] }), '{"a":[1]}');
});

test("durations read in the largest units that matter", () => {
  assert.equal(duration(5), "5s");
  assert.equal(duration(65), "1m 05s");
  assert.equal(duration(3600 * 2 + 60 * 3 + 9), "2h 03m");
  assert.equal(duration(-3), "0s");
  assert.equal(duration(Infinity), "");
});

test("file names are shortened and keep only safe characters", () => {
  assert.equal(shorten("abcdef", 4), "abc…");
  assert.equal(fileName("val/loss (x)"), "val_loss_x_");
  assert.ok(fileName("a".repeat(200)).length <= 80);
});

test("a histogram's buckets spread over the heat map's rows by overlap, keeping the total count", () => {
  const h = { edges: [0, 1, 2], counts: [10, 30] };
  const rows = resample(h, 0, 2);
  assert.equal(rows.length, ROWS);
  const total = rows.reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(total - 40) < 1e-9);
  const lower = rows.slice(0, ROWS / 2).reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(lower - 10) < 1e-9); // the first bucket covers exactly the lower half
  const constant = resample({ edges: [3, 3], counts: [7] }, 3, 3); // all values equal: one row
  assert.equal(constant[0], 7);
});

test("thousands groups a count's digits by three, as the runs table and chart notes write counts", () => {
  assert.deepEqual([0, 7, 999, 1000, 95000, 1234567, 100000].map(thousands),
    ["0", "7", "999", "1,000", "95,000", "1,234,567", "100,000"]);
});
