"""Nothing a call accepts can fail later: what the store cannot hold is refused at the call, naming
the field; what is accepted is stored and read back unchanged; and neither holds back any other
record, of this run or another. On both engines, with the real database."""

import enum
import itertools
import json
import pathlib

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

import tallyboard as tb
from tallyboard.run.capture import MAX_CLI_DEPTH
from tallyboard.run.exit_paths import end_runs
from tallyboard.values import MAX_KEY_BYTES, check_text


@pytest.fixture
def table(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        yield table
        end_runs("failed")


@pytest.fixture
def run(table):
    with table.new_run("exp", auto_log_plt=False) as writer:
        yield writer


# Any text: every code point, lone surrogates and NUL included, now and then thousands of them
# (over the key limit), and strings made of one risky character repeated.
ANY_CHAR = st.characters(exclude_categories=())
TEXTS = st.one_of(
    st.text(ANY_CHAR, max_size=20),
    st.builds(
        lambda part, times: part * times, st.text(ANY_CHAR, min_size=1, max_size=4), st.integers(1, 1500)
    ),
    st.sampled_from(["x \udcff", "a\x00b", "é" * 600, "\U0001f600" * 300, "\ufffd", "\r\n\t"]),
)


def _cli(table, text, number):
    return table.new_run("cli", cli={"n": number, text: text, "nested": [text]}, auto_log_plt=False)


FIELDS = {  # field -> (log `text` into a run, read back what was stored from the table and the run)
    "scalar tag": (lambda run, text: run.add_scalar(text, 1.5), lambda table, run: _scalar_tag(run)),
    "text content": (lambda run, text: run.add_text(text), lambda table, run: run.get_text()[0]["fragment"]),
    "text tag": (lambda run, text: run.add_text("t", tag=text), lambda table, run: run.get_text()[0]["tag"]),
    "fragment": (
        lambda run, text: run.add_fragment(text),
        lambda table, run: run.get_fragment()[0]["fragment"],
    ),
    "hparam name": (lambda run, text: run.add_hparams({text: 1}), lambda table, run: min(run.get_hparams())),
    "hparam value": (lambda run, text: run.add_hparams(v=text), lambda table, run: run.get_hparams()["v"]),
    "note": (
        lambda run, text: run.set_note(text),
        lambda table, run: table.get_experiment_raw(run.run_id)["note"],
    ),
    "run tag": (lambda run, text: run.set_tag(text), lambda table, run: run.tag),
}


def _scalar_tag(run):
    (tag,) = [tag for tag in run.scalars if run.get_scalar(tag)[-1].value == 1.5]
    return tag


RUN_FIELDS = {  # fields of new_run itself: (keyword arguments, column)
    "experiment_name": ("experiment_name", "experiment"),
    "comment": ("comment", "comment"),
    "tag": ("tag", "tag"),
}


@hypothesis.settings(
    max_examples=60, deadline=None, suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture]
)
@hypothesis.given(field=st.sampled_from([*FIELDS, *RUN_FIELDS, "cli"]), text=TEXTS)
def test_any_text_is_refused_at_the_call_or_read_back_identically(table, field, text):
    """And every other record -- one logged before in the same run, another run's -- arrives."""
    number = next(COUNTER)
    other = table.new_run("other", comment=str(number), auto_log_plt=False)
    other.add_scalar("other/value", float(number))
    stored = _log(table, field, text, number)
    other.close()
    assert other.get_scalar("other/value")[0].value == float(number)
    if stored is not None:
        assert stored == text


COUNTER = itertools.count()


def _log(table, field, text, number):
    """What `field` read back as after logging `text` into it, or None if the call refused it."""
    if field in FIELDS:
        run = table.new_run("fields", comment=str(number), auto_log_plt=False)
        run.add_scalar("before", 1.0)
        log, read = FIELDS[field]
        try:
            log(run, text)
        except (ValueError, TypeError) as error:
            assert field.split()[-1] in str(error) or "tag" in str(error)  # the error names the field
            refused = True
        else:
            refused = False
        run.close()
        assert run.status == "finished" and [s.value for s in run.get_scalar("before")] == [1.0]
        return None if refused else read(table, table.load_run(run.run_id))
    try:
        if field == "cli":
            run = _cli(table, text, number)
        else:
            keyword, _ = RUN_FIELDS[field]
            arguments = {"experiment_name": "run", "comment": str(number), keyword: text}
            if field == "experiment_name" and not text:
                return None  # an empty name is refused for another reason (tested elsewhere)
            run = table.new_run(**arguments, auto_log_plt=False)
    except (ValueError, TypeError) as error:
        assert field.split("_")[0] in str(error)
        return None
    run.close()
    raw = table.get_experiment_raw(run.run_id)
    if field == "cli":
        cli = json.loads(raw["cli"])
        assert cli["nested"] == [text] and cli["n"] == number
        return cli[text]
    return raw[RUN_FIELDS[field][1]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x \udcff", "lone surrogate"),
        ("a\x00b", "NUL"),
        ("k" * (MAX_KEY_BYTES + 1), f"limit is {MAX_KEY_BYTES}"),
        ("é" * (MAX_KEY_BYTES // 2 + 1), f"limit is {MAX_KEY_BYTES}"),  # bytes, not characters
    ],
)
def test_keys_the_store_cannot_hold_are_refused_naming_the_field(run, text, message):
    for call, field in [
        (lambda: run.add_scalar(text, 1.0), "add_scalar tag"),
        (lambda: run.add_image(np.zeros((2, 2), np.uint8), tag=text), "image tag"),
        (lambda: run.add_text("t", tag=text), "text tag"),
        (lambda: run.add_hparams({text: 1}), "hparams name"),
    ]:
        with pytest.raises(ValueError, match=message) as caught:
            call()
        assert str(caught.value).startswith(field)
        error = caught.value  # its traceback shows the refusal alone, no "during handling of" another
        assert error.__context__ is None or error.__suppress_context__
    run.add_scalar("k" * MAX_KEY_BYTES, 1.0)  # the limit itself is fine
    run.flush()
    assert run.scalars == ["k" * MAX_KEY_BYTES] and run.get_images() == [] and run.get_hparams() == {}


def test_text_over_the_limit_is_refused_and_the_limit_counts_utf8_bytes():
    assert check_text("x", "é" * 5, max_bytes=10) == "é" * 5
    with pytest.raises(ValueError, match="x is 12 bytes in UTF-8; the limit is 10"):
        check_text("x", "é" * 6, max_bytes=10)
    with pytest.raises(TypeError, match="x must be a str, got bytes"):
        check_text("x", b"bytes")


# ---- smaller things of the same family --------------------------------------------------------
@pytest.mark.parametrize("value", [10**400, -(10**400), 10**5000], ids=["1e400", "-1e400", "1e5000"])
def test_a_number_beyond_a_float_is_a_value_error_naming_the_tag(run, value):
    with pytest.raises(ValueError, match=r"'big'.*64-bit float"):
        run.add_scalar("big", value)
    run.flush()
    assert run.scalars == []


def _inside_itself() -> dict:
    """A cli holding a dict that holds itself, and a list that holds itself (not JSON, at any depth)."""
    args: dict = {"lr": 0.1}
    args["self"] = args
    runs: list = [1]
    runs.append(runs)
    args["runs"] = runs
    return {"args": args}


def _nested(depth: int) -> dict:
    """A cli of `depth` dicts, one inside the other."""
    cli: dict = {"leaf": 1}
    for _ in range(depth - 1):
        cli = {"k": cli}
    return cli


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"tag": None}, TypeError, "tag must be a str"),
        ({"tag": 3}, TypeError, "tag must be a str"),
        ({"experiment_name": None}, TypeError, "experiment_name"),
        ({"experiment_name": ""}, TypeError, "experiment_name"),
        ({"comment": 5}, TypeError, "comment must be a str"),
        ({"comment": "a\x00b"}, ValueError, "comment contains a NUL"),
        ({"keep_each": None}, TypeError, "keep_each must be an integer"),
        ({"keep_each": 0}, ValueError, "keep_each must be 1 or more"),
        ({"flush_each": "10"}, TypeError, "flush_each must be an integer"),
        ({"cli": ["a"]}, TypeError, "cli must be a dict"),
        ({"cli": {"model": object()}}, TypeError, r"cli\['model'\].*memory address"),
        ({"cli": {"fn": lambda: 1}}, TypeError, r"cli\['fn'\].*memory address"),
        ({"cli": {"deep": {"x": [object()]}}}, TypeError, r"cli\['deep'\]\['x'\]\[0\]"),
        ({"cli": {(1, 2): "tuple key"}}, TypeError, "keys must be strings"),
        ({"cli": {"path": "x \udcff"}}, ValueError, r"cli\['path'\] contains a lone surrogate"),
        ({"cli": _inside_itself()}, ValueError, r"cli\['args'\]\['self'\] is a dict or list it is inside of"),
        ({"cli": {"runs": _inside_itself()["args"]["runs"]}}, ValueError, r"cli\['runs'\]\[1\] .*a cycle"),
        ({"cli": _nested(MAX_CLI_DEPTH + 1)}, ValueError, f"nested more than {MAX_CLI_DEPTH} deep"),
    ],
)
def test_bad_new_run_arguments_are_clear_errors_and_start_nothing(table, arguments, error, message):
    with pytest.raises(error, match=message):
        table.new_run(**{"experiment_name": "exp", **arguments}, auto_log_plt=False)
    assert table.runs == []


def test_a_cli_nested_as_deep_as_allowed_starts(table):
    table.new_run("exp", cli=_nested(MAX_CLI_DEPTH), auto_log_plt=False).close()
    assert len(table.runs) == 1


class Mode(enum.Enum):
    FAST = "fast"


def test_cli_values_json_cannot_hold_are_stored_by_a_stable_rule(table):
    """Paths, enums and other objects with a text of their own are stored as that text, so the same
    command line makes the same key and uniqueness holds."""
    cli = {"data": pathlib.Path("data/train"), "mode": Mode.FAST, "sizes": (1, 2), 3: None}
    run = table.new_run("exp", cli=cli, auto_log_plt=False)
    run.close()
    assert table.get_experiment_raw(run.run_id)["cli"] == (
        '{"data": "data/train", "mode": "Mode.FAST", "sizes": [1, 2], "3": null}'
    )
    with pytest.raises(tb.DuplicateRunError):
        table.new_run("exp", cli=dict(cli), auto_log_plt=False, on_duplicate="raise")


def test_a_cli_too_long_for_an_index_row_still_starts_and_is_still_unique(table):
    """The unique key of a run with a large CLI is longer than PostgreSQL's index rows can hold
    (2704 bytes): it is indexed by its prefix (schema v3) and compared whole."""
    cli = {f"option_{i}": f"value {i} " * 5 for i in range(200)}  # ~14 kB of JSON
    first = table.new_run("exp", cli=cli, auto_log_plt=False)
    first.close()
    with pytest.raises(tb.DuplicateRunError, match=f"run id {first.run_id}"):
        table.new_run("exp", cli=dict(cli), auto_log_plt=False, on_duplicate="raise")
    second = table.new_run(
        "exp", cli={**cli, "option_199": "other"}, auto_log_plt=False
    )  # differs at the end
    second.close()
    assert second.run_id != first.run_id


def test_captured_text_is_made_storable(table, monkeypatch, tmp_path):
    """What tallyboard captures itself (command line, config file) must never stop a run from
    starting: bytes that are not UTF-8 become U+FFFD there (the config hash is of the bytes); a
    config with a NUL byte is binary and is listed, not stored (left_out.py)."""
    monkeypatch.setattr("sys.orig_argv", ["python", "train.py", "--data", "caf\udce9"])
    config = tmp_path / "config.bin"
    config.write_bytes(b"lr: 1\xff\n")
    run = table.new_run("exp", configfile=config, auto_log_plt=False)
    run.close()
    raw = table.get_experiment_raw(run.run_id)
    assert raw["command"].endswith("'caf\ufffd'") and raw["config_content"] == "lr: 1\ufffd\n"
    assert raw["config_hash"] == tb.ResultTable.get_file_hash(config)


def test_a_column_alias_the_store_cannot_hold_is_refused_and_changes_nothing(table):
    with pytest.raises(ValueError, match="alias of 'experiment' contains a NUL"):
        table.set_column_alias({"tag": "Label", "experiment": "a\x00b"})
    assert table.result_columns["tag"][1] == "Tag"


READS = {  # a read that looks a text up -> the call, given that text
    "get_scalar": lambda table, run, text: table.load_run(run).get_scalar(text),
    "get_scalar_arrays": lambda table, run, text: table.load_run(run).get_scalar_arrays(text),
    "get_histograms": lambda table, run, text: table.load_run(run).get_histograms(text),
    "get_console": lambda table, run, text: table.get_console(run, search=text),
    "compare": lambda table, run, text: table.compare(text),
    "series": lambda table, run, text: table.series(run, text),
    "iter_series": lambda table, run, text: list(table.iter_series(run, [text])),
    "summary": lambda table, run, text: table.summary(run, text),
    "runs_table": lambda table, run, text: table.runs_table(f"experiment == '{text}'"),
    "query": lambda table, run, text: table.query(f"tag ~ '{text}'"),
    "save_artifact": lambda table, run, text: table.save_artifact(run, text, "unused"),
}


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("text", ["a\x00b", "x \udcff"], ids=["nul", "lone-surrogate"])
def test_a_read_of_text_no_store_holds_is_a_value_error_saying_so(table, read, text):
    """Not psycopg's DataError (PostgreSQL text holds no NUL) nor a UnicodeEncodeError from the
    driver: a ValueError that says what is wrong with the text."""
    writer = table.new_run("exp", auto_log_plt=False)
    writer.add_scalar("train/loss", 1.0)
    writer.close()
    with pytest.raises(ValueError, match=r"NUL character|lone surrogate") as refused:
        READS[read](table, writer.run_id, text)
    assert not isinstance(refused.value, UnicodeError)


def test_an_image_over_the_pixel_limit_is_refused_at_the_call_and_logging_goes_on(table, run):
    with pytest.raises(ValueError, match="over the limit of 16,777,216 pixels"):
        run.add_image(np.broadcast_to(np.uint8(7), (8192, 8192)), tag="huge")
    run.add_image(np.zeros((4, 4), np.uint8), tag="small")
    run.flush()
    assert [image["tag"] for image in table.load_run(run.run_id).get_images()] == ["small"]
