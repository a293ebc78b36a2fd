// The numbers behind the charts (static/series-math.js), checked by hand-computed values.
import assert from "node:assert/strict";
import { test } from "node:test";

import { aggregate, appendPoints, clampToBand, decodeSeries, xTitle, ema, nonFinite, smoothingWeight, stepRange, xOf,
  AUTO_SMOOTHING, SMOOTH_MIN } from "../../src/tallyboard/dashboard/static/series-math.js";

const close = (actual, expected, digits = 12) => {
  assert.equal(actual.length, expected.length);
  actual.forEach((v, i) => {
    if (expected[i] === null || Number.isNaN(expected[i])) assert.deepEqual(v, expected[i], `index ${i}`);
    else assert.ok(Math.abs(v - expected[i]) < 10 ** -digits, `index ${i}: ${v} != ${expected[i]}`);
  });
};

// A series as /api/series answers it: steps, values and (for buckets) min and max.
const line = (steps, values, extra = {}) => ({
  step: steps, epoch: steps.map(() => null), wall: steps.map((s) => s * 10), value: values,
  min: values.slice(), max: values.slice(), start_time: 1000, last_step: steps.at(-1), ...extra,
});

test("ema is debiased: the first value is itself, then a weighted mean of the values so far", () => {
  // weight 0.5: last = 0.5*last + 0.5*v; out = last / (1 - 0.5^n)
  close(ema([2, 4, 8], 0.5), [2, (0.5 * 1 + 2) / 0.75, (0.5 * (0.5 * 1 + 2) + 4) / 0.875]);
  close(ema([3, 3, 3, 3], 0.9), [3, 3, 3, 3]); // a constant stays put, with no pull towards 0
  close(ema([1, 5, 7], 0), [1, 5, 7]);
});

test("ema keeps gaps as gaps and does not let them move the average", () => {
  const out = ema([2, null, NaN, Infinity, 4], 0.5);
  assert.equal(out[1], null);
  assert.ok(Number.isNaN(out[2]));
  assert.equal(out[3], Infinity);
  close([out[0], out[4]], ema([2, 4], 0.5));
});

test("auto smoothing smooths only series of SMOOTH_MIN logged points or more", () => {
  assert.equal(smoothingWeight("auto", SMOOTH_MIN - 1), 0);
  assert.equal(smoothingWeight("auto", SMOOTH_MIN), AUTO_SMOOTHING);
  assert.equal(smoothingWeight(0.25, 3), 0.25); // a chosen weight applies to any series
});

test("a smoothed value is kept inside its bucket's band", () => {
  assert.equal(clampToBand(5, 1, 3), 3);
  assert.equal(clampToBand(0, 1, 3), 1);
  assert.equal(clampToBand(2, 1, 3), 2);
  assert.equal(clampToBand(9, null, 3), 9); // no band: as smoothed
});

test("non-finite values are counted, whether numbers, the API's strings or empty", () => {
  assert.equal(nonFinite([1, "NaN", "Infinity", "-Infinity", null, NaN, 2.5]), 5);
  assert.equal(nonFinite([]), 0);
});

test("x values per axis mode", () => {
  const l = line([0, 5], [1, 2], { epoch: [0, null] });
  assert.deepEqual(xOf(l, "step"), [0, 5]);
  assert.deepEqual(xOf(l, "epoch"), [0, null]);
  assert.deepEqual(xOf(l, "wall"), [1000, 1050]);
  assert.deepEqual(xOf(l, "relative"), [0, 50]);
  assert.notEqual(xOf(l, "step"), l.step); // a copy: the chart may not change the series
});

test("repetitions aggregate per step: mean, min-max band, population std band", () => {
  const reps = [line([0, 1, 2], [1, 2, 3], { rep: 0 }), line([0, 1, 2], [3, 6, 9], { rep: 1 })];
  const [minmax] = aggregate(reps, () => "loss", "minmax", 0, 1);
  assert.equal(minmax.members, 2);
  assert.equal(minmax.label, "loss");
  assert.deepEqual(minmax.step, [0, 1, 2]);
  assert.deepEqual(minmax.value, [2, 4, 6]);
  assert.deepEqual(minmax.min, [1, 2, 3]);
  assert.deepEqual(minmax.max, [3, 6, 9]);
  const [std] = aggregate(reps, () => "loss", "std", 0, 1);
  close(std.min, [1, 2, 3]); // mean - sd where sd = |a - b| / 2 for two values
  close(std.max, [3, 6, 9]);
});

test("aggregation groups lines by their key and leaves out non-finite values, counting them", () => {
  const lines = [
    line([0, 1], [1, "NaN"], { run_id: 1 }), line([0, 1], [3, 5], { run_id: 1 }), line([0, 1], [10, 20], { run_id: 2 }),
  ];
  const out = aggregate(lines, (l) => l.run_id, "minmax", 0, 1);
  assert.deepEqual(out.map((l) => l.key), ["group:1", "group:2"]);
  assert.deepEqual(out[0].value, [2, 5]); // the NaN at step 1 is not part of the mean
  assert.equal(out[0].dropped, 1);
  assert.deepEqual(out[1].value, [10, 20]);
});

test("bucketed series merge per bucket of the request, not per step", () => {
  // One request, lo = 0, bucket = 10: rep 0 has its bucket points at steps 9 and 19, rep 1 at 7 and 15.
  const reps = [line([9, 19], [1, 3]), line([7, 15], [3, 5])];
  const [mean] = aggregate(reps, () => "x", "minmax", 0, 10);
  assert.deepEqual(mean.value, [2, 4]);
  assert.deepEqual(mean.step, [9, 19]); // the first line's step stands for the bucket
  assert.deepEqual([mean.min, mean.max], [[1, 3], [3, 5]]);
  // With lo = 5 the buckets are [5, 15) and [15, 25): steps 7 and 9 share one, 15 and 19 another.
  const [shifted] = aggregate(reps, () => "x", "minmax", 5, 10);
  assert.deepEqual(shifted.value, [2, 4]);
  // Unbucketed (bucket 1), steps that differ stay apart.
  assert.deepEqual(aggregate(reps, () => "x", "minmax", 0, 1)[0].step, [7, 9, 15, 19]);
});

test("live points append only after the last step the series holds", () => {
  const held = line([0, 1, 2], [1, 1, 1]);
  const fresh = line([2, 3, 4], [7, 8, 9]);
  assert.equal(appendPoints(held, fresh), true);
  assert.deepEqual(held.step, [0, 1, 2, 3, 4]);
  assert.deepEqual(held.value, [1, 1, 1, 8, 9]);
  assert.deepEqual(held.wall, [0, 10, 20, 30, 40]);
  assert.equal(held.last_step, 4);
  assert.equal(appendPoints(held, line([3, 4], [0, 0])), false); // all known: nothing drawn twice
  assert.equal(held.step.length, 5);
});

test("a zoom's x range covers the steps behind its bucketed points", () => {
  const l = line([9, 19, 29], [1, 2, 3]);
  assert.deepEqual(stepRange([l], "step", 15, 25), [10, 19]); // the point at 19 stands for steps 10..19
  assert.deepEqual(stepRange([l], "step", 0, 10), [9, 9]);
  assert.deepEqual(stepRange([l], "relative", 150, 300), [10, 29]);
  assert.equal(stepRange([l], "step", 30, 40), null);
});

test("decodeSeries expands the API's compact series into the arrays the charts read", () => {
  const raw = decodeSeries({ run_id: 1, step: { first: 10, stride: 5, count: 3 }, wall_ms: [1500, 250, 250],
    value: [1, "NaN", 3], bucket: 1 });
  assert.deepEqual(raw.step, [10, 15, 20]);
  assert.deepEqual(raw.wall, [1.5, 1.75, 2]);
  assert.deepEqual(raw.epoch, [null, null, null]);
  assert.deepEqual(raw.min, [1, null, 3]); // a NaN point has no extreme
  assert.deepEqual(raw.max, [1, null, 3]);
  assert.ok(raw.min !== raw.value && raw.max !== raw.min, "own arrays: live points are appended to each");
  assert.equal(raw.wall_ms, undefined);
  assert.equal(raw.run_id, 1);
  const bucketed = decodeSeries({ step: [7, 7, 2], wall_ms: [0, 9, 1], value: [2, 4, 5], min: [1, 3, 5],
    max: [2, 5, 5], epoch: [0, 1, 1] }); // irregular steps come as differences
  assert.deepEqual([bucketed.step, bucketed.wall], [[7, 14, 16], [0, 0.009, 0.01]]);
  assert.deepEqual([bucketed.epoch, bucketed.min, bucketed.max], [[0, 1, 1], [1, 3, 5], [2, 5, 5]]);
  const announced = { run_id: 1, new: true };
  assert.equal(decodeSeries(announced), announced);
});

test("xTitle says what the x axis is: epoch when the steps are the epochs, else step or the time", () => {
  const byEpoch = line([0, 1, 2], [1, 2, 3], { epoch: [0, 1, 2] });
  const byStep = line([0, 10, 20], [1, 2, 3], { epoch: [0, 1, 2] });
  assert.equal(xTitle([byEpoch], "step"), "epoch");
  assert.equal(xTitle([byEpoch, byStep], "step"), "step");
  assert.equal(xTitle([line([0, 1], [1, 2])], "step"), "step"); // no epochs logged
  assert.equal(xTitle([], "step"), "step");
  assert.equal(xTitle([byStep], "relative"), "time since start");
  assert.equal(xTitle([byStep], "wall"), "wall time");
  const windows = line([0, 1, 2], [1, 2, 3], { axis: "window" });
  assert.equal(xTitle([windows], "step"), "window");
  assert.equal(xTitle([windows, byStep], "step"), "step"); // not every line counts windows
  assert.equal(xTitle([windows], "relative"), "time since start");
});

test("a group of lines counts windows only when each of its lines does", () => {
  const windows = line([0, 1], [1, 2], { axis: "window" });
  const [both] = aggregate([windows, { ...windows, key: "b" }], () => "g", "minmax", 0, 1);
  const [mixed] = aggregate([windows, line([0, 1], [3, 4])], () => "g", "minmax", 0, 1);
  assert.equal(both.axis, "window");
  assert.equal(mixed.axis, undefined);
});
