"""The statistics behind the compare and hparams views, checked against scipy's own functions and
against R's documented outputs (R itself is not installed; each R number below is what R prints
for the call in the comment, and the test checks scipy agrees with it too)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from scipy import stats as sp

from tallyboard.analysis import stats

# R's `sleep` data (Cushny & Peebles), the example of R's ?t.test.
SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_welch_matches_r_t_test_on_the_sleep_data():
    # R> t.test(extra ~ group, data = sleep)
    #   t = -1.8608, df = 17.776, p-value = 0.07939
    #   95 percent confidence interval: -3.3654832  0.2054832
    #   mean in group 1 0.75, mean in group 2 2.33
    # Ours tests b against a: t.test(SLEEP_2, SLEEP_1), the same numbers with the sign flipped.
    found = stats.welch(SLEEP_1, SLEEP_2)
    assert found.diff == pytest.approx(2.33 - 0.75)
    assert found.t == pytest.approx(1.8608, abs=5e-5)
    assert found.df == pytest.approx(17.776, abs=5e-4)
    assert found.p == pytest.approx(0.07939, abs=5e-6)
    assert (found.ci_low, found.ci_high) == pytest.approx((-0.2054832, 3.3654832), abs=5e-8)


def test_welch_matches_the_formulas_r_uses_on_unequal_sizes():
    # What R> t.test(c(19.1, 21.3, 20.4, 22.8, 18.9), c(24.2, 23.9, 25.6, 22.1)) prints, worked out by
    # hand with the Welch formulas R documents (R is not installed here):
    #   means 20.5 and 23.95, var(x) = 2.615, var(y) = 2.07
    #   se^2 = 2.615/5 + 2.07/4 = 0.523 + 0.5175 = 1.0405; t = -3.45 / 1.020049 = -3.3822
    #   df = 1.0405^2 / (0.523^2/4 + 0.5175^2/3) = 6.8673; p = 2 pt(-3.3822, 6.8673) = 0.01207
    #   95% CI = -3.45 -+ qt(0.975, 6.8673) * 1.020049 = (-5.871512, -1.028488)
    a, b = [24.2, 23.9, 25.6, 22.1], [19.1, 21.3, 20.4, 22.8, 18.9]
    found = stats.welch(a, b)  # b - a = mean(x) - mean(y) in R's call
    assert found.t == pytest.approx(-3.3822, abs=5e-5)
    assert found.df == pytest.approx(6.8673, abs=5e-5)
    assert found.p == pytest.approx(0.01207, abs=5e-6)
    assert (found.ci_low, found.ci_high) == pytest.approx((-5.871512, -1.028488), abs=5e-7)


@pytest.mark.parametrize(
    "a, b",
    [(SLEEP_1, SLEEP_2), ([1.0, 2.0, 4.0], [2.0, 3.5, 5.0, 9.0, 1.0]), ([0.91, 0.93], [0.95, 0.96, 0.94])],
)
def test_welch_matches_scipy(a, b):
    reference = sp.ttest_ind(b, a, equal_var=False)
    interval = reference.confidence_interval(0.95)
    found = stats.welch(a, b)
    assert found.t == pytest.approx(reference.statistic, rel=1e-12)
    assert found.df == pytest.approx(reference.df, rel=1e-12)
    assert found.p == pytest.approx(reference.pvalue, rel=1e-10)
    assert (found.ci_low, found.ci_high) == pytest.approx((interval.low, interval.high), rel=1e-10)


def test_describe_matches_scipy_t_interval():
    found = stats.describe(SLEEP_2)
    low, high = sp.t.interval(0.95, len(SLEEP_2) - 1, loc=sp.tmean(SLEEP_2), scale=sp.sem(SLEEP_2))
    assert (found.n, found.mean) == (10, pytest.approx(2.33))
    assert found.std == pytest.approx(sp.tstd(SLEEP_2))
    assert (found.ci_low, found.ci_high) == pytest.approx((low, high))
    # R> t.test(sleep$extra[11:20])$conf.int  -> 0.8976775 3.7623225
    assert (found.ci_low, found.ci_high) == pytest.approx((0.8976775, 3.7623225), abs=5e-8)


def test_describe_of_one_value_has_no_spread_and_of_none_is_an_error():
    one = stats.describe([0.5])
    assert (one.n, one.mean) == (1, 0.5) and math.isnan(one.std) and math.isnan(one.ci_low)
    with pytest.raises(ValueError, match="at least one"):
        stats.describe([])


def test_welch_needs_two_values_and_handles_constant_groups():
    with pytest.raises(ValueError, match="two values"):
        stats.welch([1.0], [1.0, 2.0])
    assert stats.welch([1.0, 1.0], [1.0, 1.0]).p == 1.0
    different = stats.welch([1.0, 1.0], [2.0, 2.0])
    assert (different.p, different.diff) == (0.0, 1.0)


def test_holm_matches_r_p_adjust():
    # R> p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm")  -> 0.03 0.06 0.06 0.02
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # R> p.adjust(c(0.5, 0.9), "holm")  -> 1.0 1.0  (capped at 1)
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]
    assert stats.holm([]) == []


def test_power_matches_r_power_t_test():
    # R> power.t.test(n = 20, delta = 1)        -> power = 0.8689528
    assert stats.power(20, 1.0, 1.0) == pytest.approx(0.8689528, abs=5e-7)
    # R> power.t.test(power = .90, delta = 1)   -> n = 22.02110, so 23 whole runs per group
    assert stats.n_per_group(1.0, 1.0, target=0.9) == 23
    # R> power.t.test(power = .80, delta = 1)   -> n = 16.71477, so 17
    assert stats.n_per_group(1.0, 1.0) == 17
    assert stats.power(16, 1.0, 1.0) < 0.8 <= stats.power(17, 1.0, 1.0)


def test_n_per_group_is_none_without_a_difference_or_noise():
    assert stats.n_per_group(0.0, 1.0) is None
    assert stats.n_per_group(1.0, 0.0) is None
    assert stats.n_per_group(1e-9, 1.0) is None  # would need more than MAX_N


def test_verdicts_in_plain_words():
    a, b = stats.describe([0.90, 0.91, 0.92]), stats.describe([0.95, 0.96, 0.97])
    clear = stats.welch([0.90, 0.91, 0.92], [0.95, 0.96, 0.97])
    assert stats.verdict("A", "B", a, b, clear, 0.003) == "B > A, p = 0.003"
    assert (
        stats.verdict("B", "A", b, a, stats.welch([0.95, 0.96, 0.97], [0.90, 0.91, 0.92]), 0.003)
        == "B > A, p = 0.003"
    )
    # A large difference that Holm's correction left above 0.05: enough runs, so it says so.
    assert stats.verdict("A", "B", a, b, clear, 0.2) == (
        "no detectable difference with n = 3 (p = 0.2), although n = 3 per group would usually see "
        "a true difference this size: it is likely smaller than measured"
    )
    noisy_a, noisy_b = [0.90, 0.95, 0.85], [0.93, 0.97, 0.89]
    test = stats.welch(noisy_a, noisy_b)
    words = stats.verdict("A", "B", stats.describe(noisy_a), stats.describe(noisy_b), test, test.p)
    needed = stats.n_per_group(test.diff, math.sqrt((sp.tstd(noisy_a) ** 2 + sp.tstd(noisy_b) ** 2) / 2))
    assert needed is not None and needed > 3
    assert words == (
        f"no detectable difference with n = 3 (p = {test.p:.2g}); about n = {needed} per group "
        "would be needed to see a difference this size"
    )


def test_importance_matches_scipy_spearman_and_anova():
    lrs = [0.001, 0.001, 0.01, 0.01, 0.1, 0.1, 0.1]
    acc = [0.70, 0.72, 0.85, 0.83, 0.60, 0.65, 0.62]
    found = stats.importance(lrs, acc)
    rho = sp.spearmanr(lrs, acc)
    assert (found.spearman, found.spearman_p) == pytest.approx((rho.statistic, rho.pvalue))
    groups = [[0.70, 0.72], [0.85, 0.83], [0.60, 0.65, 0.62]]
    anova = sp.f_oneway(*groups)
    between, within = 2, len(acc) - 3  # eta^2 = F df_b / (F df_b + df_w)
    assert found.eta_squared == pytest.approx(
        anova.statistic * between / (anova.statistic * between + within)
    )
    assert (found.n, found.levels) == (7, 3)


def test_importance_of_a_categorical_hparam_has_eta_squared_only():
    found = stats.importance(["adam", "sgd", "adam", "sgd"], [0.9, 0.7, 0.8, 0.6])
    assert found.spearman is None
    assert found.eta_squared == pytest.approx(0.8)  # between 0.04 of total 0.05
    assert stats.importance(["adam", "adam"], [0.9, 0.8]).eta_squared is None  # one level


def test_logging_never_imports_scipy(tmp_path):
    script = (
        "import sys, tallyboard as tb\n"
        f"t = tb.ResultTable({str(tmp_path / 'r.db')!r}, nocommit_action=tb.NoCommitAction.NOP)\n"
        "r = t.new_run('e', auto_log_plt=False); r.add_hparams(lr=0.1)\n"
        "r.add_scalar('val/acc', 0.5, step=0)\n"
        "r.write_result(acc=0.5); t.close()\n"
        "print('scipy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
