"""SQLite's engine-neutral store tests, run again on PostgreSQL (`db_url` is a fresh schema here).

test_sqlite.py mixes tests of the `Store` contract with tests that open the file with sqlite3; the
contract ones are imported here so that both engines are held to the same behaviour.
"""

from store.test_sqlite import (
    test_a_failing_batch_commits_nothing_and_leaves_no_tag_id_cached,
    test_an_older_file_is_migrated_forward,
    test_batch_stores_nan_inf_and_the_last_value_of_a_repeated_step,
    test_create_run_refuses_a_duplicate_but_not_a_failed_hidden_or_debug_one,
    test_debug_run_replaces_the_previous_one_and_its_records,
    test_filters_of_media_and_texts,
    test_hparams_results_and_columns,
    test_reopening_keeps_the_recorded_unique_columns,
)

__all__ = [
    "test_a_failing_batch_commits_nothing_and_leaves_no_tag_id_cached",
    "test_an_older_file_is_migrated_forward",
    "test_batch_stores_nan_inf_and_the_last_value_of_a_repeated_step",
    "test_create_run_refuses_a_duplicate_but_not_a_failed_hidden_or_debug_one",
    "test_debug_run_replaces_the_previous_one_and_its_records",
    "test_filters_of_media_and_texts",
    "test_hparams_results_and_columns",
    "test_reopening_keeps_the_recorded_unique_columns",
]
