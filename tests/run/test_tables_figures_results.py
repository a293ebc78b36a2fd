"""The logging calls the peers' skins stand on, through a real table on each engine: tables
(`add_table`, read back by `logged_table` as a DataFrame), a given figure (`add_figure`), results
while the run goes on (`update_results`) and histograms counted elsewhere (`from_buckets`)."""

import math

import numpy as np
import pytest

import tallyboard as tb
from tallyboard.histogram import from_buckets
from tallyboard.run.exit_paths import end_runs


@pytest.fixture
def table(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        yield table
        end_runs("failed")


def test_a_logged_table_comes_back_as_a_frame_with_its_types(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        rows = [["a", 1, 0.5, True], ["NaN", 2, float("nan"), None], ["c", np.int64(3), -math.inf, False]]
        run.add_table(["name", "n", "score", "ok"], rows, step=4, tag="preds")
        run.add_table(["name"], [["later"]], step=9, tag="preds")
        run_id = run.run_id
    frame = table.logged_table(run_id, "preds", step=4)
    assert list(frame.columns) == ["name", "n", "score", "ok"]
    assert frame["name"].tolist() == ["a", "NaN", "c"]  # the string stays a string
    assert frame["n"].tolist() == [1, 2, 3]
    score = frame["score"].tolist()
    assert score[0] == 0.5 and math.isnan(score[1]) and score[2] == -math.inf  # floats again
    assert table.logged_table(run_id, "preds")["name"].tolist() == ["later"]  # the last one
    records = table.logged_table(run_id, "preds", step=4, backend="records")
    assert records[1] == {"name": "NaN", "n": 2, "score": records[1]["score"], "ok": None}
    with pytest.raises(KeyError, match=r"no table 'other'.*\['preds'\]"):
        table.logged_table(run_id, "other")


def test_a_bad_table_is_refused_at_the_call_and_nothing_is_logged(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        with pytest.raises(ValueError, match="row 1 has 1 cells for 2 columns"):
            run.add_table(["a", "b"], [[1, 2], [3]], tag="t")
        with pytest.raises(TypeError, match=r"column 'b'.*list"):
            run.add_table(["a", "b"], [[1, [2]]], tag="t")
        with pytest.raises(ValueError, match="distinct"):
            run.add_table(["a", "a"], [[1, 2]], tag="t")
        run.flush()
        with pytest.raises(KeyError):
            table.logged_table(run.run_id, "t")


def test_a_given_figure_is_a_figure_and_can_be_closed(table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots()
    axes.plot([1, 2, 3])
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_figure(figure, step=2, tag="curve", close=True)
        with pytest.raises(TypeError, match="matplotlib figure"):
            run.add_figure(np.zeros((2, 2)))
        run.flush()
        [logged] = run.get_figures()
        assert (logged["tag"], logged["step"]) == ("curve", 2) and not run.get_images()
    assert not plt.fignum_exists(figure.number)


def test_results_are_written_while_the_run_goes_on_and_kept_at_its_end(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.update_results(best=0.5)
        assert table.get_results(run.run_id).data  # readable at once, run still running
        assert table.query(backend="records")[0].results == {"best": 0.5}
        assert run.status == "running"
        run.update_results(best=0.7, epochs=3)
        run.write_result(final=0.6)
    assert table.query(backend="records")[0].results == {"best": 0.7, "epochs": 3, "final": 0.6}
    loaded = table.load_run(run.run_id)
    with pytest.raises(RuntimeError, match="read-only"):
        loaded.update_results(best=1.0)
    for refused in ("add_table", "add_figure"):
        with pytest.raises(RuntimeError, match="read-only"):
            getattr(loaded, refused)(["a"], [[1]])


def test_a_histogram_counted_elsewhere_is_stored_as_given(table):
    counts, edges = np.histogram(np.arange(10.0), bins=5)
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_histogram("w", from_buckets(edges, counts), step=1)
        run.flush()
        [record] = run.get_histograms("w")
    histogram = record.histogram
    assert (histogram.count, histogram.minimum, histogram.maximum) == (10, 0.0, 9.0)
    assert histogram.counts == (2, 2, 2, 2, 2) and histogram.edges == tuple(edges.tolist())
    assert histogram.total == pytest.approx(9 * 10 / 2)  # the centres of five buckets of two


@pytest.mark.parametrize(
    ("edges", "counts", "message"),
    [([0, 1], [1, 2], "one more edge"), ([1, 0], [3], "increasing"), ([0, math.inf], [1], "finite"),
     ([0, 1], [-1], "negative")],
)  # fmt: skip
def test_buckets_that_are_no_histogram_are_refused(edges, counts, message):
    with pytest.raises(ValueError, match=message):
        from_buckets(edges, counts)
