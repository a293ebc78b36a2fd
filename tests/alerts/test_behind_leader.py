"""`BehindLeader`'s sequential test: its false-alarm rate measured by simulation (it must stay
under `alpha` for runs exactly as good as the leader, even when a run's values at nearby steps
are strongly correlated), its power on a run that is clearly behind, its t quantiles against
scipy, and the rule on a real table (a leader logged with repetitions)."""

import math
import random

import pytest
from scipy import stats

import tallyboard as tb
from tallyboard.alerts import BehindLeader
from tallyboard.alerts.behind_leader import band, look_alpha
from tallyboard.alerts.student_t import upper_quantile, upper_tail
from tallyboard.run.exit_paths import end_runs

STEPS = 200
REPS = 5


class Points:
    """`Bands` over curves held in memory: {run_id: [curve of each repetition]}."""

    def __init__(self, curves):
        self.curves = curves

    def finished(self):
        return list(self.curves)

    def points(self, run_ids, metric):
        for run in run_ids:
            for rep, curve in enumerate(self.curves[run]):
                yield from (((run, rep), step, value) for step, value in enumerate(curve))


def curve(rng, shift=0.0):
    """A loss curve whose seed-to-seed deviation is a random walk: strongly correlated in time (a
    seed that is behind at step 100 is behind at step 101), normal at each step."""
    walk, values = 0.0, []
    for step in range(STEPS):
        walk += rng.gauss(0.0, 0.05)
        values.append(2.0 / math.sqrt(step + 1) + walk + shift)
    return values


def alarms(rng, shift, rule):
    leader = [curve(rng) for _ in range(REPS)]
    watch = rule.watch("loss", 2, Points({1: leader}))
    return any(watch.observe(step, value) for step, value in enumerate(curve(rng, shift)))


def test_runs_as_good_as_the_leader_are_called_behind_at_most_alpha_of_the_time():
    rng = random.Random(31)
    rule = BehindLeader("loss", leader=1, alpha=0.05)
    trials = 2000
    rate = sum(alarms(rng, 0.0, rule) for _ in range(trials)) / trials
    slack = 3 * math.sqrt(0.05 * 0.95 / trials)  # three standard errors of the simulation
    assert rate <= 0.05 + slack, f"false-alarm rate {rate:.3f} over alpha 0.05"


def test_a_run_clearly_behind_is_called_behind_nearly_always_and_early():
    rng = random.Random(32)
    rule = BehindLeader("loss", leader=1, alpha=0.05)
    assert sum(alarms(rng, 1.0, rule) for _ in range(200)) / 200 >= 0.95
    watch = rule.watch("loss", 2, Points({1: [[1.0 + 0.01 * r] * STEPS for r in range(REPS)]}))
    fired = [step for step in range(STEPS) if watch.observe(step, 3.0)]
    assert fired == [0] and watch.looks == 1  # the first look spends the most alpha


def test_looks_are_spaced_and_only_where_the_leader_has_a_band():
    leader = {1: [[float(r + step) for step in range(100)] for r in range(REPS)]}
    watch = BehindLeader("loss", leader=1, spacing=2.0).watch("loss", 2, Points(leader))
    for step in range(100):
        watch.observe(step, step + 2.0)  # level with the leader's mean
    assert watch.looks == len([0, 1, 2, 4, 8, 16, 32, 64])
    assert sum(look_alpha(0.01, j) for j in range(1, 10_000)) < 0.01
    assert BehindLeader("loss", leader=[1, 2]).watch("loss", 2, Points(leader)).leaders == [1]  # not itself


def test_without_a_named_leader_the_best_finished_band_leads():
    flat = [[2.0 + 0.01 * r] * STEPS for r in range(REPS)]
    better = [[1.0 + 0.01 * r] * STEPS for r in range(REPS)]
    alone = [[0.1] * STEPS]  # best, but one repetition is no band
    watch = BehindLeader("loss").watch("loss", 9, Points({1: flat, 2: better, 3: alone, 9: better}))
    assert watch.observe(0, 1.5).text.startswith("loss = 1.5 at step 0; the leader (run 2) has 1.02")
    assert watch.leaders == [2]  # not itself (9), though as good
    nobody = BehindLeader("loss").watch("loss", 9, Points({3: alone}))
    assert [nobody.observe(step, 5.0) for step in range(10)] == [None] * 10 and nobody.looks == 0


def test_the_band_keeps_steps_with_enough_repetitions():
    points = [((0,), 0, 1.0), ((1,), 0, 3.0), ((2,), 0, 2.0), ((0,), 1, 5.0), ((1,), 1, math.nan)]
    assert band(points, 3) == {0: (2.0, 1.0, 3)}


@pytest.mark.parametrize("dof", [1, 2, 3, 4, 7, 10, 29])
def test_the_t_distribution_matches_scipy(dof):
    for t in (0.1, 1.0, 3.0, 12.0):
        assert upper_tail(t, dof) == pytest.approx(stats.t.sf(t, dof), rel=1e-9)
    for p in (0.2, 0.01, 1e-5, 1e-8):
        assert upper_quantile(p, dof) == pytest.approx(stats.t.isf(p, dof), rel=1e-7)


def test_the_rule_on_a_table_uses_the_leaders_repetitions(tmp_path):
    with tb.ResultTable(str(tmp_path / "results.db"), nocommit_action=tb.NoCommitAction.NOP) as table:
        try:
            with table.new_run("leader", auto_log_plt=False) as leader:
                for rep in range(REPS):
                    if rep:
                        leader.new_repetition()
                    for step in range(50):
                        leader.add_scalar("val/acc", 0.9 + 0.002 * rep - 0.5 / (step + 1), step=step)
            rule = BehindLeader("val/acc", leader=leader.run_id, mode="max", alpha=0.01, stop=True)
            with table.new_run("hopeless", auto_log_plt=False) as run:
                run.add_rule(rule)
                for step in range(50):
                    run.add_scalar("val/acc", 0.5 - 0.5 / (step + 1), step=step)
                run.flush()
                assert run.should_stop()
                (alert,) = table.alerts(run.run_id)
            assert alert.title == "val/acc behind the leader" and alert.stop and alert.step == 0
            assert f"run {leader.run_id}" in alert.text and "false-alarm rate of 0.01" in alert.text
            with table.new_run("no leader named", auto_log_plt=False) as other:  # the best finished run
                other.add_rule(BehindLeader("val/acc", mode="max"))
                other.add_scalar("val/acc", 0.0, step=0)
                other.flush()
                (found,) = table.alerts(other.run_id)
            assert f"the leader (run {leader.run_id})" in found.text
        finally:
            end_runs("failed")


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="leader"):
        BehindLeader("loss", leader="best")
    with pytest.raises(TypeError, match="leader"):
        BehindLeader("loss", leader=[])
    with pytest.raises(ValueError, match="alpha"):
        BehindLeader("loss", leader=1, alpha=0.7)
    with pytest.raises(ValueError, match="mode"):
        BehindLeader("loss", leader=1, mode="lower")
