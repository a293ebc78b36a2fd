"""Every error a user catches is in `tallyboard.errors`, under one base, reachable from the top."""

import tallyboard as tb
from tallyboard import errors, store


def test_every_error_is_public_at_the_top_and_shares_the_base():
    assert set(errors.__all__) <= set(tb.__all__)
    for name in errors.__all__:
        error = getattr(tb, name)
        assert error is getattr(errors, name)
        assert issubclass(error, errors.TallyboardError)


def test_errors_keep_the_builtin_bases_callers_caught_before():
    assert issubclass(tb.DuplicateRunError, RuntimeError)
    assert issubclass(tb.NotDurableError, RuntimeError)
    assert issubclass(tb.FilterError, ValueError)
    assert issubclass(tb.NotAResultTable, ValueError)
    assert store.DuplicateRunError is tb.DuplicateRunError  # the older import path


def test_a_missing_run_is_a_key_error_whose_text_is_the_message_alone(tmp_path):
    table = tb.ResultTable(str(tmp_path / "results.db"))
    try:
        table.load_run(8)
    except KeyError as error:  # the built-in callers caught before
        assert isinstance(error, tb.NotFoundError) and str(error) == "no run with id 8"
    else:
        raise AssertionError("load_run(8) of an empty table returned")
    finally:
        table.close()
